package limiter

import (
	"errors"
	"fmt"
	"strings"
)

// MaxLevels is the most levels a policy may have.
const MaxLevels = 4

// Levels splits a key into nested levels at Separator and gives each its limit: with
// Separator "/" and Limits [50, 30, 20], the key org-1/team-a/user-7 charges org-1
// (50 per window), org-1/team-a (30) and org-1/team-a/user-7 (20) in one decision, which
// is denied at the first level that has no room, and then charges none. A key with fewer
// parts charges only its levels; the last level holds the rest of the key, separators
// and all. Comparable, so a Policy stays a map key.
type Levels struct {
	Separator string
	Limits    [MaxLevels]int64
	N         int // levels in use: Limits[:N]
}

func (l *Levels) validate(a Algorithm, limit int64) error {
	switch {
	case a != FixedWindow:
		return fmt.Errorf("apply only to fixed_window")
	case l.N < 1 || l.N > MaxLevels:
		return fmt.Errorf("must list 1 to %d limits", MaxLevels)
	case l.Separator == "" || len(l.Separator) > 4 || !ValidateLevelSeparator(l.Separator):
		return fmt.Errorf("separator must be 1 to 4 printable characters")
	case limit != 0:
		return fmt.Errorf("a policy with levels takes no limit: each level has its own")
	}
	for i, v := range l.Limits[:l.N] {
		if v < 1 || v > MaxQuota {
			return fmt.Errorf("limit %d of level %d must be between 1 and %d", v, i+1, int64(MaxQuota))
		}
	}
	for _, v := range l.Limits[l.N:] {
		if v != 0 {
			return errors.New("limits beyond N must be 0")
		}
	}
	return nil
}

// ErrEmptyLevel is the ErrInvalidKey of a key that starts with its policy's level
// separator ("/u1", a user of an empty org): its first level would be the empty key, which
// no backend can count.
var ErrEmptyLevel = fmt.Errorf("%w: it starts with the level separator, so its first level is empty", ErrInvalidKey)

// checkKey returns ErrEmptyLevel for a key whose first level is empty under l.
func (l *Levels) checkKey(key string) error {
	if l.N >= 2 && strings.HasPrefix(key, l.Separator) {
		return ErrEmptyLevel
	}
	return nil
}

// ValidateLevelSeparator reports a separator a key may be split at: no spaces or controls.
func ValidateLevelSeparator(s string) bool {
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return ValidateKey(s) == nil
}

// RouteKey is the part of key that places it in a cluster (backend cluster: the owner of
// its partition decides it): with two or more levels, the first level, the key up to its
// first separator, so that one owner holds every level of an org and decides them in one
// step as memory does; else the key itself.
func (p *Policy) RouteKey(key string) string {
	if p.Levels.N < 2 {
		return key
	}
	var out [MaxLevels]string
	levelKeys(key, p.Levels.Separator, 2, &out)
	return out[0]
}

// levelKeys writes the keys of key's levels into out and returns how many: the prefixes
// of key ending before each separator, then key itself, at most n.
func levelKeys(key, sep string, n int, out *[MaxLevels]string) int {
	k := 0
	from := 0
	for k < n-1 {
		var i int
		if len(sep) == 1 {
			// A plain loop: keys are short, and IndexByte's setup cost more than the scan
			// (BenchmarkLevelsStore).
			i = -1
			for j := from; j < len(key); j++ {
				if key[j] == sep[0] {
					i = j - from
					break
				}
			}
		} else {
			i = strings.Index(key[from:], sep)
		}
		if i < 0 {
			break
		}
		out[k] = key[:from+i]
		k++
		from += i + len(sep)
	}
	out[k] = key
	return k + 1
}

// KeysInto writes the keys of key's levels under l into out and returns how many:
// LevelKeys without its allocation, for a decision's hot path.
func (l *Levels) KeysInto(key string, out *[MaxLevels]string) int {
	return levelKeys(key, l.Separator, l.N, out)
}

// LevelKeys returns the keys of key's levels under l (see Levels).
func (l *Levels) LevelKeys(key string) []string {
	var out [MaxLevels]string
	n := levelKeys(key, l.Separator, l.N, &out)
	return append([]string(nil), out[:n]...)
}
