package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// errUsage is returned after a usage message has been printed; main exits 2 without repeating it.
var errUsage = errors.New("usage")

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("slide "+name, flag.ContinueOnError)
	fs.SetOutput(w)
	return fs
}

// envName is the environment variable that sets a flag: SLIDE_ + upper case, dashes as underscores.
func envName(flagName string) string {
	return "SLIDE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags applies SLIDE_<FLAG> environment variables, then the command line, so the command
// line wins. A bad value in either is reported with where it came from.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return parseFlagsEnv(fs, args, os.LookupEnv)
}

func parseFlagsEnv(fs *flag.FlagSet, args []string, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil {
			return
		}
		if v, ok := lookup(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment %s=%q: %w", envName(f.Name), v, e)
			}
		}
	})
	if err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errUsage
		}
		return errUsage
	}
	return nil
}
