package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/freeze"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// A run measures host freezes with its probe child (as root; else it
// says why not): the result's summary covers the window, every second of
// the series has its figure, the CSV a column, the text a line; the
// child is gone when loadgen exits; --host-probe=false measures nothing.
func TestHostProbeInARun(t *testing.T) {
	srv, err := fakechf.Start(fakechf.Options{Accounts: 100, Balance: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	js, csvFile := filepath.Join(dir, "r.json"), filepath.Join(dir, "s.csv")
	bin := loadgenBinary(t)
	args := []string{"run", "--target", "http://" + srv.Addr(), "--rate", "200", "--duration", "2s", "--warmup", "0", "--ramp-up", "0",
		"--subscribers", "100", "--audit", "off", "--progress", "off", "--json", js, "--csv", csvFile}
	code, out, errs := runBinary(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	res, err := report.ReadJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if res.HostFreezes != nil || !strings.Contains(res.HostFreezesNote, "not measured") || !strings.Contains(out, "host freezes: not measured") {
			t.Fatalf("without root: freezes %+v, note %q", res.HostFreezes, res.HostFreezesNote)
		}
		return
	}
	f := res.HostFreezes
	if f == nil {
		t.Fatalf("no host freezes as root (note %q)", res.HostFreezesNote)
	}
	// 2 s on each CPU at one wake-up each 5 ms: about 400 a CPU, fewer
	// only by the periods a freeze or the window's edges swallowed.
	for _, c := range f.CPUs {
		if c.Wakeups < 200 || c.Wakeups > 450 {
			t.Errorf("cpu %d: %d wake-ups in a 2 s window", c.CPU, c.Wakeups)
		}
	}
	if len(f.CPUs) == 0 || f.PeriodMs != 5 || f.ProbeCPUSeconds <= 0 || f.FrozenPercent < 0 ||
		(f.Count > 0) != (f.FrozenMs > 0) || !strings.Contains(out, "host freezes (a SCHED_FIFO probe on each of") {
		t.Errorf("summary %+v; text:\n%s", f, out)
	}
	for _, p := range res.Series {
		if p.HostFreezeMs == nil {
			t.Errorf("second %d has no host_freeze_ms", p.Second)
		}
	}
	rows, err := readCSV(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(rows[0], "host_freeze")
	if col < 0 || len(rows) != 2+len(res.Series) {
		t.Fatalf("CSV header %v, %d rows for %d seconds", rows[0], len(rows), len(res.Series))
	}
	for _, r := range rows[2:] {
		if v, err := strconv.ParseFloat(r[col], 64); err != nil || v < 0 {
			t.Errorf("host_freeze %q", r[col])
		}
	}
	if pids := probesOf(bin); len(pids) > 0 {
		t.Errorf("probe processes left after loadgen exited: %v", pids)
	}

	code, out, errs = runBinary(t, append(args, "--host-probe=false")...)
	if code != 0 {
		t.Fatalf("--host-probe=false: exit %d: %s", code, errs)
	}
	if res, err = report.ReadJSON(js); err != nil {
		t.Fatal(err)
	}
	if res.HostFreezes != nil || res.HostFreezesNote != "" || strings.Contains(out, "host freezes") || res.Series[0].HostFreezeMs != nil {
		t.Errorf("--host-probe=false still measured: %+v %q", res.HostFreezes, res.HostFreezesNote)
	}
}

func readCSV(path string) ([][]string, error) {
	b, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return csv.NewReader(b).ReadAll()
}

// probesOf lists the processes running `bin freeze-probe`, after a
// moment for a killed one to be reaped.
func probesOf(bin string) []int {
	time.Sleep(200 * time.Millisecond)
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 2 && args[0] == bin && args[1] == freeze.Command {
			pids = append(pids, pid)
		}
	}
	return pids
}
