package redislimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/limiter"
)

// levelsScript decides a fixed-window policy with levels in one call
// (scripts/fixed_window_levels.lua): every level charged, or none.
var levelsScript = loadScript("fixed_window_levels")

// LevelsScript returns the script of fixed-window policies with levels.
func LevelsScript() *Script { return levelsScript }

// levelKeys returns the counters of window win of key's levels under p, all under the
// hash tag of the first level: rl:{level1}:policy:fwl:N:level.
func (b *Backend) levelKeys(p *limiter.Policy, levels []string, win fixedWin) []string {
	keys := make([]string, len(levels))
	base := b.Key(p, levels[0]) // prefix{level1}:policy:fw
	for i, lk := range levels {
		buf := make([]byte, 0, len(base)+len(lk)+24)
		buf = append(buf, base...)
		buf = append(buf, 'l', ':')
		if p.Calendar != 0 {
			buf = append(buf, 'c')
			buf = strconv.AppendInt(buf, win.start/1e6, 10)
		} else {
			buf = strconv.AppendInt(buf, win.start/p.Window.Microseconds(), 10)
		}
		buf = append(buf, ':')
		buf = append(buf, lk...)
		keys[i] = string(buf)
	}
	return keys
}

// decideLevels decides r, whose policy has levels, with one fixed_window_levels call (more
// when the named window is not Redis's, as decideFixedOne). It returns the request's
// decision, each level's (per, keys: their keys).
func (b *Backend) decideLevels(ctx context.Context, r *limiter.BackendRequest) (d limiter.Decision, per []limiter.Decision, levels []string, err error) {
	p := r.Policy
	levels = p.Levels.LevelKeys(r.Key)
	for _, lk := range levels {
		if limiter.ValidateKey(lk) != nil {
			return limiter.Decision{Policy: p.Name}, nil, levels, limiter.ErrInvalidKey
		}
	}
	now := b.fixedNow(r)
	for try := 0; try < maxWindowTries; try++ {
		win := windowAt(p, now)
		arg := any("")
		if b.client {
			arg = now
		}
		args := make([]any, 0, 4+len(levels))
		args = append(args, arg, r.Cost, win.start, win.end)
		for i := range levels {
			args = append(args, p.Levels.Limits[i])
		}
		sent := time.Now().UnixMicro()
		cmd := b.run(ctx, levelsScript, b.levelKeys(p, levels, win), args)
		v := make([]int64, 2+len(levels))
		if err := decodeLevels(cmd, v); err != nil {
			return limiter.Decision{Policy: p.Name}, nil, levels, fmt.Errorf("running fixed_window_levels script: %w", err)
		}
		if !b.client {
			b.observe(v[0], sent)
		}
		if v[1] < 0 {
			now = v[0]
			continue
		}
		at := v[0]
		if b.client {
			at = now
		}
		per = make([]limiter.Decision, len(levels))
		denied := int(v[1]) - 1
		for i := range levels {
			lp := *p
			lp.Levels, lp.Limit = limiter.Levels{}, p.Levels.Limits[i]
			n, cost := v[2+i], r.Cost
			if denied >= 0 && cost > 0 {
				// Nothing was charged: decide as a denied INCRBY would have seen it.
				n += cost
				if i != denied && n <= lp.Limit {
					n -= cost // this level had room: report it as it stands
					cost = 0
				}
			}
			per[i] = fixedDecision(&lp, cost, n, at, win)
			per[i].Policy = p.Name
		}
		best := denied
		if best < 0 {
			best = 0
			for i := range per {
				if per[i].Remaining < per[best].Remaining {
					best = i
				}
			}
		}
		d = per[best]
		if denied >= 0 {
			d.Level = levels[denied]
		}
		return d, per, levels, nil
	}
	return limiter.Decision{Policy: p.Name}, nil, levels, fmt.Errorf("running fixed_window_levels script: %w", errWindowRace)
}

// decodeLevels reads a fixed_window_levels reply: {now, -1} or {now, denied, n_1..n_k}.
func decodeLevels(cmd *goredis.Cmd, v []int64) error {
	raw, err := cmd.Slice()
	if err != nil {
		return err
	}
	if len(raw) == 2 {
		v[0], _ = raw[0].(int64)
		v[1], _ = raw[1].(int64)
		if v[1] != -1 {
			return fmt.Errorf("reply of %d values, want %d", len(raw), len(v))
		}
		return nil
	}
	return decodeInts(cmd, v)
}

// PeekLevels implements limiter.LevelPeeker: each level's numbers for key at now,
// charging nothing.
func (b *Backend) PeekLevels(ctx context.Context, p *limiter.Policy, key string, now time.Time) ([]limiter.Decision, []string, error) {
	_, per, levels, err := b.decideLevels(ctx, &limiter.BackendRequest{Policy: p, Key: key, Now: now})
	return per, levels, err
}
