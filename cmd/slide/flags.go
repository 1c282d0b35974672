package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// errUsage marks a mistake on the command line. run prints an error wrapping it as one
// line followed by "run 'slide CMD --help' for usage", and exits 2.
var errUsage = errors.New("usage")

// errHelp is returned after --help was printed; run exits 0.
var errHelp = errors.New("help")

// usageError is a command-line mistake of one subcommand ("serve", "query window").
type usageError struct{ cmd, msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return errUsage }

// usagef returns the usage error of fs's subcommand, kept to one line: a line break that
// came with the user's input is shown escaped.
func usagef(fs *flag.FlagSet, format string, a ...any) error {
	msg := strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(fmt.Sprintf(format, a...))
	return &usageError{cmd: strings.TrimPrefix(fs.Name(), "slide "), msg: msg}
}

// newFlagSet returns a flag set that reports errors instead of exiting and prints
// --help (the subcommand's text from helpTexts and its flags) to w.
func newFlagSet(name string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("slide "+name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() { printHelp(fs.Output(), name, fs) }
	return fs
}

// envName is the environment variable that sets a flag: SLIDE_ + upper case, dashes as underscores.
func envName(flagName string) string {
	return "SLIDE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// envNameOf is the variable that sets flag name of fs: envName, except slide query's --addr,
// which is SLIDE_URL. serve's --addr is a listen address and query's a URL, so one exported
// SLIDE_ADDR set for one would break the other.
func envNameOf(fs *flag.FlagSet, name string) string {
	if name == "addr" && strings.HasPrefix(fs.Name(), "slide query") {
		return "SLIDE_URL"
	}
	return envName(name)
}

// parseFlags parses the command line, then applies SLIDE_<FLAG> environment variables to
// the flags the command line did not set, so the command line wins. --help prints the help
// and returns errHelp; a bad flag or value returns a usage error naming where it came from
// (--slots abc, SLIDE_SLOTS=abc).
func parseFlags(fs *flag.FlagSet, args []string) error {
	return parseFlagsEnv(fs, args, os.LookupEnv)
}

func parseFlagsEnv(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) error {
	if flagSetHook != nil {
		flagSetHook(fs)
	}
	if err := parseCommandLine(fs, args); err != nil {
		return err
	}
	cli := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cli[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || cli[f.Name] {
			return
		}
		v, ok := lookup(envNameOf(fs, f.Name))
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = usagef(fs, "%s=%s: %s", envNameOf(fs, f.Name), shellWord(v), setProblem(f, e))
			return
		}
		setEnvOrigin(fs, f, v)
	})
	return err
}

// flagSetHook, when set (by tests), sees every flag set as its subcommand parses it.
var flagSetHook func(*flag.FlagSet)

// parseCommandLine is fs.Parse without the flag package's output: an error becomes one
// usage line (the caller points to --help), and -h/--help prints the help and returns errHelp.
func parseCommandLine(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return errHelp
	}
	return usagef(fs, "%s", parseProblem(fs, err))
}

var (
	reInvalidValue = regexp.MustCompile(`(?s)^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): `)
	reNeedsArg     = regexp.MustCompile(`(?s)^flag needs an argument: -(.+)$`)
	reUndefined    = regexp.MustCompile(`(?s)^flag provided but not defined: -(.+)$`)
)

// parseProblem rewords the flag package's errors in the --flag spelling the help uses.
func parseProblem(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		return "unknown flag " + shellWord("--"+m[1]) + didYouMean(fs, m[1])
	}
	if m := reNeedsArg.FindStringSubmatch(msg); m != nil {
		return shellWord("--"+m[1]) + " needs a value"
	}
	if m := reInvalidValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[2]); f != nil {
			v, uerr := strconv.Unquote(`"` + m[1] + `"`)
			if uerr != nil {
				v = m[1]
			}
			return "--" + f.Name + " " + shellWord(v) + ": " + setProblem(f, errors.New(msg[len(m[0]):]))
		}
	}
	return msg
}

// setProblem says what a flag wants when a value did not parse.
func setProblem(f *flag.Flag, err error) string {
	g, ok := f.Value.(flag.Getter)
	_, size := f.Value.(bytesFlag)
	if _, win := f.Value.(windowFlag); !ok || win || size {
		return err.Error() // a window length or a byte size says what is wrong in its own words
	}
	rng := strings.Contains(err.Error(), "out of range")
	switch g.Get().(type) {
	case bool:
		return "want true or false"
	case int, int64, uint, uint64:
		if rng {
			return "out of range"
		}
		return "want a whole number"
	case float64:
		if rng {
			return "out of range"
		}
		return "want a number"
	case time.Duration:
		return "want a duration such as 500ms, 10s or 5m"
	}
	return strings.TrimPrefix(err.Error(), "parse error: ")
}

// shellWord prints a value as it would be typed: quoted only when it needs quotes.
func shellWord(v string) string {
	if v != "" && strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./:,=@%+*", r))
	}) < 0 {
		return v
	}
	return strconv.Quote(v)
}

// envOrigins remembers, per flag set, the flags whose value came from the environment, so
// a later check of the value can name SLIDE_RINGS rather than --rings.
var envOrigins sync.Map // *flag.FlagSet → *sync.Map of flag name → envOrigin

// envOrigin is an environment value as given, and as the flag prints it once set: a later
// command-line value (batch parses flags after its FILE too) changes the latter.
type envOrigin struct{ raw, set string }

func setEnvOrigin(fs *flag.FlagSet, f *flag.Flag, raw string) {
	m, _ := envOrigins.LoadOrStore(fs, &sync.Map{})
	m.(*sync.Map).Store(f.Name, envOrigin{raw, f.Value.String()})
}

// fromEnv returns the environment value flag name holds, if it still holds one.
func fromEnv(fs *flag.FlagSet, name string) (string, bool) {
	m, ok := envOrigins.Load(fs)
	if !ok {
		return "", false
	}
	v, ok := m.(*sync.Map).Load(name)
	f := fs.Lookup(name)
	if !ok || f == nil || f.Value.String() != v.(envOrigin).set {
		return "", false
	}
	return v.(envOrigin).raw, true
}

// flagRef names a flag and its value as the user gave it: "--slots 0" from the command
// line (or by default), "SLIDE_SLOTS=0" from the environment.
func flagRef(fs *flag.FlagSet, name string) string {
	if v, ok := fromEnv(fs, name); ok {
		return envNameOf(fs, name) + "=" + shellWord(v)
	}
	f := fs.Lookup(name)
	if f == nil {
		return "--" + name
	}
	return "--" + name + " " + shellWord(f.Value.String())
}

// flagErrorf returns the usage error "REF: problem" for flag name of fs.
func flagErrorf(fs *flag.FlagSet, name, format string, a ...any) error {
	return usagef(fs, "%s: %s", flagRef(fs, name), fmt.Sprintf(format, a...))
}

// flagError is a flag value found wrong after parsing, by code that has no flag set (a
// config's own checks). checkFlags turns it into a usage error naming where the value
// came from.
type flagError struct {
	name string
	err  error
}

func (e *flagError) Error() string { return "--" + e.name + ": " + e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// asFlagError rewrites a *flagError in err as a usage error of fs; other errors pass.
func asFlagError(fs *flag.FlagSet, err error) error {
	var fe *flagError
	if errors.As(err, &fe) {
		return flagErrorf(fs, fe.name, "%v", fe.err)
	}
	return err
}

// zeroMeans lists, per subcommand, the numeric flags for which 0 means something (what
// it means, as the error says it). checkNumbers refuses every negative numeric flag, and
// 0 for the flags named in positive.
type zeroMeans map[string]string

// checkNumbers validates the numeric flags of fs after parsing, so 0 and negative values
// are judged alike: a negative value is refused ("must be 0 (no cap) or more" when 0 has
// a meaning), and 0 is refused for the flags in positive. Flags in neither list are
// only refused when negative, and no flag is refused at its default value.
func checkNumbers(fs *flag.FlagSet, zero zeroMeans, positive ...string) error {
	pos := map[string]bool{}
	for _, p := range positive {
		pos[p] = true
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil {
			return
		}
		g, ok := f.Value.(flag.Getter)
		if !ok || f.Value.String() == f.DefValue {
			return // a flag's own default (-1 for "auto", say) is never refused
		}
		var v float64
		integer := true
		switch x := g.Get().(type) {
		case int:
			v = float64(x)
		case int64:
			v = float64(x)
		case float64:
			v, integer = x, false
			if math.IsNaN(x) || math.IsInf(x, 0) {
				err = flagErrorf(fs, f.Name, "want a finite number")
				return
			}
		case time.Duration:
			v, integer = float64(x), false
		default:
			return // unsigned or not a number
		}
		switch {
		case v < 0 && zero[f.Name] != "":
			err = flagErrorf(fs, f.Name, "must be 0 (%s) or more", zero[f.Name])
		case v < 0 && pos[f.Name] && integer:
			err = flagErrorf(fs, f.Name, "must be at least 1")
		case v < 0 && pos[f.Name]:
			err = flagErrorf(fs, f.Name, "must be positive")
		case v < 0:
			err = flagErrorf(fs, f.Name, "must not be negative")
		case v == 0 && pos[f.Name] && integer:
			err = flagErrorf(fs, f.Name, "must be at least 1")
		case v == 0 && pos[f.Name]:
			err = flagErrorf(fs, f.Name, "must be positive")
		}
	})
	return err
}

// noArgs refuses positional arguments of a subcommand that takes none.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef(fs, "unexpected argument %s (this command takes flags only)", shellWord(fs.Arg(0)))
	}
	return nil
}

// envNamed rewrites an error that begins by naming a flag ("--policies: ..." or "--addr
// 127.0.0.1:8080: ...") to name the environment variable instead ("SLIDE_POLICIES=...:
// ...") when that flag's value came from there, so runtime failures point where the value
// was set as well. Other errors pass unchanged.
func envNamed(fs *flag.FlagSet, err error) error {
	if err == nil {
		return nil
	}
	rest, ok := strings.CutPrefix(err.Error(), "--")
	if !ok {
		return err
	}
	i := strings.IndexAny(rest, ": ")
	if i <= 0 {
		return err
	}
	name, tail := rest[:i], rest[i:]
	if _, ok := fromEnv(fs, name); !ok {
		return err
	}
	if tail[0] == ' ' { // "--addr VALUE: ...": the value is in the reference already
		j := strings.Index(tail, ": ")
		if j < 0 {
			return err
		}
		tail = tail[j:]
	}
	return &renamedError{flagRef(fs, name) + tail, err}
}

type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }
