package cpu

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is the resident memory of one component at one instant: RSS
// now and the peak (the kernel's high-water mark, VmHWM, for local
// processes; for a scraped process the largest RSS seen, as the metric
// has no peak).
type Memory struct {
	RSS  int64 `json:"rss_bytes"`
	Peak int64 `json:"peak_bytes"`
}

// memorySource is a Source that can also read its resident memory.
type memorySource interface {
	Memory(ctx context.Context) (Memory, error)
}

// Memory reads the resident memory of every source that has one
// (processes and Prometheus endpoints); sources that fail are left out.
// peaks carries the largest RSS seen so far per component, for sources
// without a kernel high-water mark; it may be nil.
func (s *Sampler) Memory(ctx context.Context, peaks map[string]Memory) map[string]Memory {
	out := map[string]Memory{}
	for _, src := range s.sources {
		ms, ok := src.(memorySource)
		if !ok {
			continue
		}
		m, err := ms.Memory(ctx)
		if err != nil {
			continue
		}
		o := out[src.Name()]
		o.RSS += m.RSS
		o.Peak += m.Peak
		if p, ok := peaks[src.Name()]; ok && p.Peak > o.Peak {
			o.Peak = p.Peak
		}
		out[src.Name()] = o
	}
	return out
}

// Memory sums VmRSS and VmHWM of the processes.
func (p *Proc) Memory(context.Context) (Memory, error) {
	var m Memory
	for _, pid := range p.pids {
		b, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "status"))
		if err != nil {
			return Memory{}, fmt.Errorf("%w: cannot read the memory of %s: %v", ErrGone, p.name, err)
		}
		one := parseStatusMemory(b)
		m.RSS += one.RSS
		m.Peak += one.Peak
	}
	return m, nil
}

// parseStatusMemory reads VmRSS and VmHWM (kB) from /proc/<pid>/status.
func parseStatusMemory(b []byte) Memory {
	var m Memory
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			m.RSS = v << 10
		case "VmHWM:":
			m.Peak = v << 10
		}
	}
	if m.Peak < m.RSS {
		m.Peak = m.RSS
	}
	return m
}

// Memory scrapes process_resident_memory_bytes.
func (m *Metrics) Memory(ctx context.Context) (Memory, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return Memory{}, fmt.Errorf("cannot scrape %s: %w", m.url, err)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return Memory{}, fmt.Errorf("cannot scrape %s: %w", m.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Memory{}, fmt.Errorf("cannot scrape %s: status %d", m.url, resp.StatusCode)
	}
	v, err := parseGauge(resp.Body, "process_resident_memory_bytes")
	return Memory{RSS: int64(v), Peak: int64(v)}, err
}

// parseGauge finds an unlabelled sample of name in Prometheus text.
func parseGauge(r io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("cannot read metrics: %w", err)
	}
	return 0, fmt.Errorf("%w: no %s in metrics", ErrSource, name)
}
