package chassis

import (
	"context"
	"testing"

	"github.com/chf-testbed/testbed/chassis/discovery"
)

// BenchmarkClientDo measures the hot path: pick an endpoint and make a pooled
// call to an echo server on loopback (server cost included).
func BenchmarkClientDo(b *testing.B) {
	s, err := NewServer(ServerConfig{Service: "bench", Listen: "127.0.0.1:0", Handler: echoHandler})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	c, err := NewClient(ClientConfig{Peer: "bench", Source: discovery.Static(s.Addr())})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	body := make([]byte, 200)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]byte, 0, 512)
		for pb.Next() {
			var err error
			if dst, err = c.Do(ctx, "/ocp/v1/charge", body, dst[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
