package pagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/chf-testbed/testbed/loadgen/compare"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// artefactDir is where the pages and their screenshots stay after the
// test: $TEST_ARTIFACTS, else results/test-artefacts/pages (git-ignored).
func artefactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "results", "test-artefacts")
	}
	dir = filepath.Join(dir, "pages")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// page is one rendered page and the charts it must show.
type page struct {
	name   string
	path   string
	charts int
}

// writePages renders a run report, a sweep report, a comparison and the
// results index into dir.
func writePages(t *testing.T, dir string) []page {
	t.Helper()
	run := Run(1, "calico-pinned", 2000, 2600, 0.4)
	runFiles, err := run.WriteAll(filepath.Join(dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	runCharts, err := run.Charts()
	if err != nil {
		t.Fatal(err)
	}
	sw := Sweep(2, "sriov-pinned", 0.3)
	swDir := filepath.Join(dir, "sweep")
	if err := os.MkdirAll(swDir, 0o755); err != nil {
		t.Fatal(err)
	}
	swPath := filepath.Join(swDir, "sweep.html")
	writeFile(t, swPath, sw.WriteHTML)
	if err := writeJSON(filepath.Join(swDir, "sweep.json"), sw); err != nil {
		t.Fatal(err)
	}
	other := Run(3, "baremetal", 1500, 2600, 0.35)
	other.Provenance = run.Provenance
	missing := Run(4, "no-cpu-source", 2000, 2600, 0.5)
	missing.CPUSeconds, missing.CPUPercent = map[string]float64{}, map[string]float64{}
	if err := missing.Recompute(); err != nil {
		t.Fatal(err)
	}
	tab, err := compare.New([]compare.Run{{Label: "calico-pinned", Result: run}, {Label: "baremetal", Result: other}, {Label: "no-cpu-source", Result: missing}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmpPath := filepath.Join(dir, "compare.html")
	writeFile(t, cmpPath, tab.WriteHTML)
	cmpCharts, err := tab.Charts()
	if err != nil {
		t.Fatal(err)
	}
	if err := report.WriteIndex(dir); err != nil {
		t.Fatal(err)
	}
	return []page{
		{"run", runFiles.HTML, len(runCharts)},
		{"sweep", swPath, len(sw.Charts())},
		{"compare", cmpPath, len(cmpCharts)},
		{"index", filepath.Join(dir, "index.html"), 0},
	}
}

func writeFile(t *testing.T, path string, fn func(io.Writer) error) {
	t.Helper()
	var b bytes.Buffer
	if err := fn(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPagesInBrowser renders the pages in headless Chromium: no console
// error, every chart present with a non-empty drawing, chart text in the
// page's sans font; the screenshots stay in the artefact directory.
func TestPagesInBrowser(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium not found (install it with `make deb-deps`): %v", err)
	}
	dir := artefactDir(t)
	pages := writePages(t, dir)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	var mu sync.Mutex
	var consoleErrs []string
	lerr := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				consoleErrs = append(consoleErrs, fmt.Sprintf("console.%s: %v", ev.Type, ev.Args))
			}
		case *runtime.EventExceptionThrown:
			consoleErrs = append(consoleErrs, "exception: "+ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				consoleErrs = append(consoleErrs, fmt.Sprintf("log %s: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	if lerr != nil {
		t.Fatal(lerr)
	}
	// chromedp enables the runtime and log domains of the tab itself.
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			mu.Lock()
			consoleErrs = nil
			mu.Unlock()
			type chart struct {
				Title string  `json:"title"`
				W     float64 `json:"w"`
				H     float64 `json:"h"`
				Paths int     `json:"paths"`
				Texts int     `json:"texts"`
				Font  string  `json:"font"`
			}
			if _, err := chromedp.Run(bctx, chromedp.Navigate("file://"+p.path)); err != nil {
				t.Fatalf("cannot load %s: %v", p.path, err)
			}
			charts, err := chromedp.Run(bctx, chromedp.Evaluate[[]chart](`[...document.querySelectorAll('figure.chart')].map(f => {
				const s = f.querySelector('svg'); const r = s ? s.getBoundingClientRect() : {width: 0, height: 0};
				const tx = s ? s.querySelector('text') : null;
				return {title: (f.querySelector('h2') || {}).textContent || '', w: r.width, h: r.height,
					paths: s ? s.querySelectorAll('path').length : 0, texts: s ? s.querySelectorAll('text').length : 0,
					font: tx ? getComputedStyle(tx).fontFamily : ''};
			})`))
			if err != nil {
				t.Fatalf("cannot inspect %s: %v", p.path, err)
			}
			links, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('a[href]').length`))
			if err != nil {
				t.Fatalf("cannot inspect %s: %v", p.path, err)
			}
			png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatalf("cannot screenshot %s: %v", p.path, err)
			}
			if p.charts > 0 { // the first chart alone, at full size: for reading the details
				one, err := chromedp.Run(bctx, chromedp.Screenshot("figure.chart"))
				if err != nil {
					t.Fatalf("cannot screenshot a chart of %s: %v", p.path, err)
				}
				if err := os.WriteFile(filepath.Join(dir, p.name+"-chart.png"), one, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			shot := filepath.Join(dir, p.name+".png")
			if err := os.WriteFile(shot, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot %s (%d bytes)", shot, len(png))
			mu.Lock()
			errs := append([]string(nil), consoleErrs...)
			mu.Unlock()
			for _, e := range errs {
				t.Errorf("%s: %s", p.name, e)
			}
			if len(charts) != p.charts {
				t.Errorf("%s: %d charts on the page, want %d", p.name, len(charts), p.charts)
			}
			for _, c := range charts {
				if c.Title == "" || c.W < 300 || c.H < 100 || c.Paths < 5 || c.Texts < 4 {
					t.Errorf("%s: chart %q is empty or missing: %+v", p.name, c.Title, c)
				}
				if !strings.Contains(c.Font, "sans") {
					t.Errorf("%s: chart %q text font is %q, want the page's sans font", p.name, c.Title, c.Font)
				}
			}
			if p.name == "index" && links < 3 {
				t.Errorf("index: %d links, want one per run, sweep and comparison", links)
			}
		})
	}
}

// writeJSON writes v to path as the commands do.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
