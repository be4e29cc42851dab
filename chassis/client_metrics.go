package chassis

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// clientMetrics holds the metrics of one Client.
type clientMetrics struct {
	routes     *serverMetrics // per path, reusing the route table
	retries    atomic.Uint64
	ejections  atomic.Uint64
	endpoints  atomic.Int64
	lastUpdate atomic.Int64 // Unix ns of the last endpoint set
}

func newClientMetrics(peer string) *clientMetrics {
	return &clientMetrics{routes: newServerMetrics(peer, nil)}
}

func (m *clientMetrics) route(path string) *routeStats {
	var buf [128]byte
	key := appendRoute(buf[:0], path)
	if rs := (*m.routes.routes.Load())[string(key)]; rs != nil {
		return rs
	}
	return m.routes.addRoute(string(key))
}

var (
	clientsMu sync.Mutex
	clients   = map[*Client]struct{}{}
)

func registerClient(c *Client) {
	clientsMu.Lock()
	clients[c] = struct{}{}
	clientsMu.Unlock()
}

func unregisterClient(c *Client) {
	clientsMu.Lock()
	delete(clients, c)
	clientsMu.Unlock()
}

// clientMetricsText appends the metrics of every live Client of the process.
func clientMetricsText(dst []byte) []byte {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if len(clients) == 0 {
		return dst
	}
	now := time.Now().UnixNano()
	dst = append(dst, "# HELP chf_http_client_requests_total Calls to peers, by peer, route and status code (0 = transport error).\n# TYPE chf_http_client_requests_total counter\n"...)
	for c := range clients {
		for _, rs := range *c.metrics.routes.routes.Load() {
			for code := range rs.codes {
				n := rs.codes[code].Load()
				if n == 0 {
					continue
				}
				dst = append(dst, `chf_http_client_requests_total{peer="`...)
				dst = append(dst, c.cfg.Peer...)
				dst = append(dst, `",route="`...)
				dst = append(dst, rs.route...)
				dst = append(dst, `",code="`...)
				dst = strconv.AppendInt(dst, int64(code), 10)
				dst = append(dst, "\"} "...)
				dst = strconv.AppendUint(dst, n, 10)
				dst = append(dst, '\n')
			}
		}
	}
	dst = append(dst, "# HELP chf_http_client_request_duration_seconds Call latency, retries included, by peer and route.\n# TYPE chf_http_client_request_duration_seconds histogram\n"...)
	for c := range clients {
		for _, rs := range *c.metrics.routes.routes.Load() {
			dst = rs.lat.appendText(dst, "chf_http_client_request_duration_seconds", `peer="`+c.cfg.Peer+`",route="`+rs.route+`"`)
		}
	}
	gauge := func(dst []byte, name, help string, f func(c *Client) string) []byte {
		typ := "gauge"
		if strings.HasSuffix(name, "_total") {
			typ = "counter"
		}
		dst = append(dst, "# HELP "+name+" "+help+"\n# TYPE "+name+" "+typ+"\n"...)
		for c := range clients {
			dst = append(dst, name+`{peer="`...)
			dst = append(dst, c.cfg.Peer...)
			dst = append(dst, "\"} "...)
			dst = append(dst, f(c)...)
			dst = append(dst, '\n')
		}
		return dst
	}
	dst = gauge(dst, "chf_http_client_endpoints", "Endpoints known for the peer.", func(c *Client) string {
		return strconv.FormatInt(c.metrics.endpoints.Load(), 10)
	})
	dst = gauge(dst, "chf_http_client_endpoints_ejected", "Endpoints currently ejected as outliers.", func(c *Client) string {
		return strconv.Itoa(c.bal.Ejected())
	})
	dst = gauge(dst, "chf_http_client_retries_total", "Retries made.", func(c *Client) string {
		return strconv.FormatUint(c.metrics.retries.Load(), 10)
	})
	dst = gauge(dst, "chf_http_client_ejections_total", "Outlier ejections.", func(c *Client) string {
		return strconv.FormatUint(c.metrics.ejections.Load(), 10)
	})
	dst = gauge(dst, "chf_discovery_last_update_age_seconds", "Age of the endpoint set in use.", func(c *Client) string {
		lu := c.metrics.lastUpdate.Load()
		if lu == 0 {
			return "NaN"
		}
		return strconv.FormatFloat(float64(now-lu)/1e9, 'f', 3, 64)
	})
	return dst
}
