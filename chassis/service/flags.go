package service

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvPrefix prefixes the environment variable of every flag.
const EnvPrefix = "CHF_"

// envAliases lists further environment variables read for a flag, after
// CHF_<NAME>, in the form Kubernetes sets them (downward API).
var envAliases = map[string][]string{
	"k8s-namespace": {"POD_NAMESPACE"},
}

// EnvName returns the environment variable read for flag name:
// CHF_ + name upper-cased with '-' and '.' replaced by '_'.
func EnvName(name string) string {
	return EnvPrefix + strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToUpper(name))
}

// ParseFlags parses args into fs, then sets every flag not given on the
// command line from its environment variable (EnvName(flag), and
// POD_NAMESPACE for --k8s-namespace) when that is set. A bad value in the
// environment is an error naming the variable and the flag. It returns
// flag.ErrHelp for -h/--help like fs.Parse.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		for _, env := range append([]string{EnvName(f.Name)}, envAliases[f.Name]...) {
			v, ok := os.LookupEnv(env)
			if !ok {
				continue
			}
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("cannot set --%s from environment variable %s=%q: %w", f.Name, env, v, err))
			}
			return
		}
	})
	return errors.Join(errs...)
}
