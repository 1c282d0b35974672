// Package logrepeat keeps a warning that repeats from filling the log. While Kafka or a peer
// is down, every retry fails the same way: the consumer group's join once a second, the
// cluster's describe every two, the snapshots' metadata read, kafka-go's own lines, about
// three lines a second an instance, ten thousand an hour, each saying what the first said.
// A Log lets a line through when its text is new, or when it was last written Every ago; in
// between it counts the lines it holds back, and the next one written says how many
// (repeated=N), so an outage is a line a minute per failure, not a flood, and nothing is
// hidden for good. A rate limit over all lines stays the callers' (a burst of different
// failures is still bounded).
package logrepeat

import (
	"regexp"
	"sync"
	"time"
)

// maxKeys bounds the texts a Log remembers: past it, the texts not written within Every are
// forgotten (a text forgotten is new again: written at once).
const maxKeys = 256

// Log decides which repeated lines to write. Safe for concurrent use. The zero value is not
// usable: New.
type Log struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]*entry
}

type entry struct {
	last time.Time // when the text was last written
	held int       // lines of the text held back since
}

// New returns a Log writing each text at most once every every.
func New(every time.Duration) *Log {
	return &Log{every: every, now: time.Now, seen: make(map[string]*entry)}
}

// localAddr is a connection's local address in a Go network error ("read tcp
// 127.0.0.1:57678->10.0.0.5:9092"): a new ephemeral port each retry, so not part of what a
// line says.
var localAddr = regexp.MustCompile(`[^ ]+->`)

// Allow reports whether a line of text may be written now and, when it may, how many lines
// of the same text were held back since it was last written. Texts that differ only in a
// connection's local address (localAddr) are the same.
func (l *Log) Allow(text string) (ok bool, held int) { return l.AllowIf(text, nil) }

// AllowIf is Allow for a caller that writes a line only when write (a rate limit over all
// its lines) agrees too; nil write always does. A line Allow would let through but write
// refuses counts as held back, and its text stays due: the next line of it is written as
// soon as write agrees, saying how many were held. (Checked apart, a refusal of the rate
// limit after Allow lost the line and silenced its text for a whole Every.)
func (l *Log) AllowIf(text string, write func() bool) (ok bool, held int) {
	text = localAddr.ReplaceAllLiteralString(text, "->")
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if e := l.seen[text]; e != nil {
		if now.Sub(e.last) < l.every || write != nil && !write() {
			e.held++
			return false, 0
		}
		held, e.held, e.last = e.held, 0, now
		return true, held
	}
	if len(l.seen) >= maxKeys {
		for k, e := range l.seen { // the texts not written within every first
			if now.Sub(e.last) >= l.every {
				delete(l.seen, k)
			}
		}
		for k := range l.seen { // then any, down to half
			if len(l.seen) < maxKeys/2 {
				break
			}
			delete(l.seen, k)
		}
	}
	if write != nil && !write() {
		l.seen[text] = &entry{held: 1} // never written: due at once, saying it was held
		return false, 0
	}
	l.seen[text] = &entry{last: now}
	return true, 0
}

// Attrs are the attributes that say how many lines of a text were held back: none when held
// is 0, else "repeated" and the count, and "over" the interval they were held back in.
func (l *Log) Attrs(held int) []any {
	if held == 0 {
		return nil
	}
	return []any{"repeated", held, "over", l.every.String()}
}
