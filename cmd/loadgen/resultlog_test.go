package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/chf-testbed/testbed/loadgen/fakechf"
	"github.com/chf-testbed/testbed/loadgen/report"
)

// run --result-log prints the result as the last line of stdout, which
// report.ParseResultLog reads back as the --json file's result.
func TestResultLogFlag(t *testing.T) {
	srv, err := fakechf.Start(fakechf.Options{Accounts: 100, Balance: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	js := filepath.Join(t.TempDir(), "r.json")
	code, out, errs := runBinary(t, "run", "--target", "http://"+srv.Addr(), "--rate", "100", "--duration", "300ms",
		"--warmup", "0", "--ramp-up", "0", "--subscribers", "100", "--audit", "off", "--progress", "plain",
		"--shard", "1/2", "--json", js, "--result-log")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, report.ResultLogMarker+"{") {
		t.Fatalf("the last stdout line is not the result line: %.200q", last)
	}
	if strings.Contains(errs, report.ResultLogMarker) {
		t.Errorf("the result line went to stderr too")
	}
	// The pod's log interleaves both streams: parse them together.
	got, err := report.ParseResultLog(strings.NewReader(errs + out))
	if err != nil {
		t.Fatal(err)
	}
	want, err := report.ReadJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("result line differs from the --json file:\nline %+v\nfile %+v", got, want)
	}
	if got.Shard != "1/2" || got.Transactions == 0 {
		t.Errorf("result line: shard %q, %d transactions", got.Shard, got.Transactions)
	}
	// Without the flag there is no such line.
	code, out, _ = runBinary(t, "run", "--target", "http://"+srv.Addr(), "--rate", "100", "--duration", "300ms",
		"--warmup", "0", "--ramp-up", "0", "--subscribers", "100", "--audit", "off", "--progress", "off")
	if code != 0 || strings.Contains(out, report.ResultLogMarker) {
		t.Errorf("without --result-log: exit %d, stdout has the marker: %v", code, strings.Contains(out, report.ResultLogMarker))
	}
}
