package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// help describes a command for --help: the first line is the command's
// one-line summary, then its synopsis and notes, then its flags.
type help struct {
	name     string // "run"
	synopsis string // "loadgen run --target URL [flags]"
	text     string // paragraphs after the synopsis, may be empty
}

// newFlagSet returns the flag set of a command. Parse errors are
// reported by parseFlags, not printed by the flag package.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("loadgen "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// writeHelp prints h and the flags of fs to w.
func writeHelp(w io.Writer, fs *flag.FlagSet, h help) {
	fmt.Fprintf(w, "loadgen %s: %s\n\nusage: %s\n", h.name, commands[h.name].summary, h.synopsis)
	if h.text != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(h.text, "\n"))
	}
	fmt.Fprintf(w, "\n%s\nflags:\n", exitCodes)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parseFlags parses args, which must hold flags only: --help prints the
// help on stdout and returns flag.ErrHelp; an unknown flag, a bad value
// or a positional argument is a usageError.
func parseFlags(fs *flag.FlagSet, h help, args []string) error {
	pos, err := parseInterspersed(fs, h, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q: loadgen %s takes flags only", pos[0], h.name)}
	}
	return nil
}

// parseInterspersed parses flags that may come after positional arguments
// ("compare A.json B.json --baseline 1") and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, h help, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				writeHelp(os.Stdout, fs, h)
				return nil, flag.ErrHelp
			}
			return nil, usageError{err}
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// setFlags returns the names of the flags args set.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// flagValues returns every flag's effective value (for the report's
// provenance).
func flagValues(fs *flag.FlagSet) map[string]string {
	out := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { out[f.Name] = f.Value.String() })
	return out
}
