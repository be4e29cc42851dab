package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/chf-testbed/testbed/internal/readfile"
)

// UpdateIndex rebuilds the results index of dir, a report directory: the
// index sits in the nearest ancestor (or dir itself) named "results", at
// most indexDepth levels up; a dir outside any "results" tree has no
// index and UpdateIndex does nothing. It returns the index written, if any.
func UpdateIndex(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("cannot find the results index of %s: %w", dir, err)
	}
	for i := 0; i <= indexDepth; i++ {
		if filepath.Base(abs) == "results" {
			return filepath.Join(abs, "index.html"), WriteIndex(abs)
		}
		up := filepath.Dir(abs)
		if up == abs {
			break
		}
		abs = up
	}
	return "", nil
}

// indexEntry is one row of the results index.
type indexEntry struct {
	kind, label, started, dir string
	figures                   []string // offered, TPS, p99, errors, SUT µs/txn, verdict
	links                     []string // relative paths
}

// indexDepth bounds how deep WriteIndex looks under the results directory.
const indexDepth = 4

// WriteIndex writes root/index.html: every run (result.json), sweep
// (sweep.json), lab (lab.json) and comparison (compare.html) found under
// root, newest first, with its key figures and links to its files. The
// commands call it after each run, sweep and lab; it reads only the files
// it lists, so a broken file is listed as unreadable, not fatal.
func WriteIndex(root string) error {
	var entries []indexEntry
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a directory that vanished meanwhile
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.Count(rel, string(filepath.Separator)) >= indexDepth {
				return filepath.SkipDir
			}
			return nil
		}
		dir := filepath.Dir(rel)
		switch d.Name() {
		case "result.json":
			entries = append(entries, runEntry(path, dir))
		case "sweep.json":
			entries = append(entries, sweepEntry(path, dir))
		case "lab.json":
			entries = append(entries, indexEntry{kind: "lab", label: dir, dir: dir, started: modTime(path), links: existing(root, dir, "lab.html", "lab.md", "lab.json")})
		case "compare.html":
			entries = append(entries, indexEntry{kind: "comparison", label: dir, dir: dir, started: modTime(path), links: existing(root, dir, "compare.html", "compare.md")})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot list results under %s: %w", root, err)
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].started > entries[j].started })
	var b bytes.Buffer
	fmt.Fprintf(&b, "# loadgen results\n\n%d entries under `%s`, newest first; rebuilt after each run, sweep and lab.\n\n", len(entries), root)
	var rows strings.Builder
	rows.WriteString("<table>\n<tr><th>started</th><th>kind</th><th>label</th><th>offered TPS</th><th>TPS</th><th>p99 ms</th><th>errors</th><th>SUT µs/txn</th><th>verdict</th><th>files</th></tr>\n")
	for _, e := range entries {
		figs := append(e.figures, make([]string, 6)...)[:6]
		fmt.Fprintf(&rows, `<tr><td>%s</td><td class="t">%s</td><td class="t">%s</td>`, html.EscapeString(e.started), e.kind, html.EscapeString(strings.ReplaceAll(e.label, ".", "(top)")))
		for i, f := range figs {
			cls := ""
			if i == 5 {
				cls = verdictClass(f)
			}
			fmt.Fprintf(&rows, "<td%s>%s</td>", cls, html.EscapeString(orNA(f)))
		}
		rows.WriteString(`<td class="t">`)
		for i, l := range e.links {
			if i > 0 {
				rows.WriteString(" · ")
			}
			fmt.Fprintf(&rows, `<a href="%s">%s</a>`, html.EscapeString(filepath.ToSlash(l)), html.EscapeString(filepath.Base(l)))
		}
		rows.WriteString("</td></tr>\n")
	}
	rows.WriteString("</table>\n")
	var page bytes.Buffer
	if err := WriteSVGPage(&page, "loadgen results", func(w io.Writer) { w.Write(b.Bytes()) }, []string{rows.String()}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "index.html"), page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("cannot write results index: %w", err)
	}
	return nil
}

func verdictClass(v string) string {
	switch {
	case strings.HasPrefix(v, "FAIL"), strings.HasPrefix(v, "unreadable"):
		return ` class="fail"`
	case strings.HasPrefix(v, "pass"):
		return ` class="pass"`
	}
	return ""
}

func modTime(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return st.ModTime().UTC().Format("2006-01-02 15:04:05Z")
}

// existing returns dir/name for each name that exists under root.
func existing(root, dir string, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(root, dir, n)); err == nil {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out
}

func runEntry(path, dir string) indexEntry {
	root := strings.TrimSuffix(path, filepath.Join(dir, "result.json"))
	e := indexEntry{kind: "run", dir: dir, label: dir, links: existing(root, dir, "report.html", "report.md", "result.json", "series.csv")}
	r, err := ReadJSON(path)
	if err != nil {
		e.started, e.figures = modTime(path), []string{"", "", "", "", "", "unreadable: " + err.Error()}
		return e
	}
	if r.Label != "" {
		e.label = r.Label + " (" + dir + ")"
	}
	if r.Shard != "" {
		e.kind = "shard " + r.Shard
	}
	e.started = r.Started.UTC().Format("2006-01-02 15:04:05Z")
	e.figures = []string{fmt.Sprintf("%.0f", r.OfferedTPS), fmt.Sprintf("%.0f", r.TPS), fmt.Sprintf("%.3f", r.LatencyMs.P99),
		fmt.Sprintf("%.3f%%", 100*r.ErrorRate), r.sutUs(), r.verdict()}
	return e
}

// verdict sums up a run: thresholds, audit, interruption.
func (r *Result) verdict() string {
	var bad []string
	if len(r.Thresholds) > 0 && !r.ThresholdsOK {
		bad = append(bad, "thresholds")
	}
	if !r.Audit.Skipped && !r.Audit.OK {
		bad = append(bad, "audit")
	}
	if r.Interrupted {
		bad = append(bad, "interrupted")
	}
	if len(r.Incomplete) > 0 {
		bad = append(bad, "incomplete")
	}
	if len(bad) > 0 {
		return "FAIL: " + strings.Join(bad, ", ")
	}
	if len(r.Thresholds) == 0 {
		return "pass (no thresholds)"
	}
	return "pass"
}

func sweepEntry(path, dir string) indexEntry {
	root := strings.TrimSuffix(path, filepath.Join(dir, "sweep.json"))
	e := indexEntry{kind: "sweep", dir: dir, label: dir, started: modTime(path), links: existing(root, dir, "sweep.html", "sweep.md", "sweep.json")}
	var s struct {
		Label   string  `json:"label"`
		KneeTPS float64 `json:"knee_tps"`
		Steps   []struct {
			OfferedTPS float64 `json:"offered_tps"`
			Pass       bool    `json:"pass"`
			Result     *Result `json:"result"`
		} `json:"steps"`
	}
	b, err := readfile.Read(path, MaxFileBytes)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		e.figures = []string{"", "", "", "", "", "unreadable: " + err.Error()}
		return e
	}
	if s.Label != "" {
		e.label = s.Label + " (" + dir + ")"
	}
	if len(s.Steps) > 0 && s.Steps[0].Result != nil {
		e.started = s.Steps[0].Result.Started.UTC().Format("2006-01-02 15:04:05Z")
	}
	for _, st := range s.Steps {
		if st.Pass && st.Result != nil && st.OfferedTPS == s.KneeTPS {
			r := st.Result
			e.figures = []string{fmt.Sprintf("knee %.0f", s.KneeTPS), fmt.Sprintf("%.0f", r.TPS), fmt.Sprintf("%.3f", r.LatencyMs.P99),
				fmt.Sprintf("%.3f%%", 100*r.ErrorRate), r.sutUs(), ""}
		}
	}
	if s.KneeTPS > 0 {
		e.figures = append(e.figures, make([]string, 6)...)[:6]
		e.figures[5] = fmt.Sprintf("pass up to %.0f TPS (%d steps)", s.KneeTPS, len(s.Steps))
	} else {
		e.figures = []string{"", "", "", "", "", fmt.Sprintf("FAIL: no step met the SLO (%d steps)", len(s.Steps))}
	}
	return e
}
