package cpu

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestMemory(t *testing.T) {
	m := parseStatusMemory([]byte("Name:\tchf\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"))
	if m.RSS != 1<<20 || m.Peak != 2<<20 {
		t.Fatalf("parsed %+v, want RSS 1 MiB peak 2 MiB", m)
	}
	self, err := Self("loadgen").Memory(context.Background())
	if err != nil || self.RSS <= 0 || self.Peak < self.RSS {
		t.Fatalf("own memory %+v, %v", self, err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 3.5e+07\nprocess_cpu_seconds_total 1\n"))
	}))
	defer srv.Close()
	s := NewSampler(NewMetrics("abm", srv.URL), Self("loadgen"), NewProc("gone", 1<<30))
	got := s.Memory(context.Background(), map[string]Memory{"abm": {Peak: 5e7}})
	if got["abm"].RSS != 35e6 || got["abm"].Peak != 5e7 {
		t.Fatalf("abm %+v, want RSS 35e6 and the peak seen before (5e7)", got["abm"])
	}
	if _, ok := got["gone"]; ok {
		t.Fatal("a process that does not exist has a memory figure")
	}
	if got["loadgen"].RSS <= 0 {
		t.Fatalf("loadgen %+v", got["loadgen"])
	}
}
