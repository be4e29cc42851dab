// Package scenarios holds the scenario files shipped with the load
// generator, embedded so that `--scenario NAME` finds them from any
// directory (loadgen/scenario.Open).
package scenarios

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Lookup returns the YAML of the built-in scenario name ("busy-hour").
func Lookup(name string) ([]byte, bool) {
	if strings.ContainsAny(name, "/\\.") {
		return nil, false
	}
	b, err := files.ReadFile(name + ".yaml")
	return b, err == nil
}

// Names returns the built-in scenarios' names, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}
