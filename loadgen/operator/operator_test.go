package operator

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAbortThenUnbar: each abort call is followed by an unbar of the same
// account; Barred covers the requests whose span overlaps the window from
// the abort call to the unbar's answer, and a failed unbar leaves the
// window open.
func TestAbortThenUnbar(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	failUnbar := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		fail := failUnbar && strings.HasSuffix(r.URL.Path, SuffixUnbar)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer 0123456789abcdef" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if fail {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if strings.HasSuffix(r.URL.Path, SuffixUnbar) {
			w.Write([]byte(`{"supi":"x","balance":1}`))
			return
		}
		w.Write([]byte(`{"sessions":1,"withNotifyUri":1,"notified":1,"failed":0}`))
	}))
	defer srv.Close()
	c, err := New(Config{Targets: []string{strings.TrimPrefix(srv.URL, "http://")}, Token: "0123456789abcdef", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if !c.Trigger([]byte("imsi-1"), true) || !c.Trigger([]byte("imsi-2"), false) {
		t.Fatal("refused")
	}
	c.Close(5 * time.Second)
	after := time.Now()
	want := []string{"POST " + PathAccounts + "imsi-1" + SuffixAbort, "POST " + PathAccounts + "imsi-1" + SuffixUnbar, "POST " + PathAccounts + "imsi-2" + SuffixReauthorize}
	if strings.Join(paths, ",") != strings.Join(want, ",") {
		t.Fatalf("calls %v, want %v", paths, want)
	}
	st := c.Stats()
	if st.OK != 2 || st.Unbarred != 1 || st.UnbarFailed != 0 || st.Notified != 2 {
		t.Fatalf("stats %+v", st)
	}
	s1 := []byte("imsi-1")
	c.mu.Lock()
	w := c.bars["imsi-1"]
	c.mu.Unlock()
	if w.from.Before(before) || w.until.After(after) || !w.until.After(w.from) {
		t.Fatalf("bar window %v..%v, want inside the calls' %v..%v", w.from, w.until, before, after)
	}
	// Inside the window: between the abort's start and the unbar's answer
	// (the abort starts when the worker gets to it, which on a loaded
	// machine is well after Trigger returns).
	inside := w.from.Add(w.until.Sub(w.from) / 2)
	switch {
	case !c.Barred(s1, before.Add(-time.Second), inside):
		t.Fatal("a request answered inside the window is not barred")
	case !c.Barred(s1, before, after):
		t.Fatal("a request spanning the window is not barred")
	case c.Barred(s1, before.Add(-2*time.Second), before.Add(-time.Second)):
		t.Fatal("a request answered before the abort is barred")
	case c.Barred(s1, after.Add(time.Millisecond), after.Add(time.Second)):
		t.Fatal("a request sent after the unbar is barred")
	case c.Barred([]byte("imsi-2"), before, after):
		t.Fatal("a re-authorised account is barred")
	}

	// A failed unbar: the account stays barred, the window open.
	c, err = New(Config{Targets: []string{strings.TrimPrefix(srv.URL, "http://")}, Token: "0123456789abcdef", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	failUnbar = true
	mu.Unlock()
	c.Trigger(s1, true)
	c.Close(5 * time.Second)
	if st := c.Stats(); st.UnbarFailed != 1 || st.Unbarred != 0 || !strings.Contains(st.LastError, "500") {
		t.Fatalf("stats %+v", st)
	}
	if later := time.Now().Add(time.Hour); !c.Barred(s1, later, later.Add(time.Millisecond)) {
		t.Fatal("the window closed although the unbar failed")
	}
}

// ReadToken trims the file, and refuses a short token or one a header
// cannot carry, naming the flag.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	for i, c := range []struct {
		file, want, err string
	}{
		{"operator-token-0123456789\n", "operator-token-0123456789", ""},
		{"  operator-token-0123456789  ", "operator-token-0123456789", ""},
		{"short\n", "", "at least 16 characters"},
		{"operator token 0123456789", "", "visible ASCII"},
		{"operator-token-\x7f0123456789", "", "visible ASCII"},
		{"operator-token-caf\u00e9-0123", "", "visible ASCII"},
	} {
		path := filepath.Join(dir, "token"+string(rune('a'+i)))
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadToken(path)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("%q: %q, %v; want %q", c.file, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "--operator-token-file")) {
			t.Errorf("%q: err = %v, want one naming --operator-token-file saying %q", c.file, err, c.err)
		}
	}
}
