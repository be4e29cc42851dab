package aslite

import (
	"bytes"
	"encoding/base64"
	"net"
	"strconv"
	"strings"
	"time"
)

// Version reported by the build and version info commands.
const Version = "7.1.0.0"

const features = "batch-any;blob-bits;float;peers;pquery;pscans;query-show;replicas;replicas-all;replicas-master;truncate-namespace"

// fullBitmap is the base64 of a 4096-bit map with every partition owned.
var fullBitmap = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xFF}, nPartitions/8))

// handleInfo answers an info request: one "name\tvalue\n" per name asked,
// in order, echoing the full name.
func (s *Server) handleInfo(c *conn, dst, body []byte) []byte {
	dst, at := beginProto(dst)
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		var name []byte
		if i < 0 {
			name, body = body, nil
		} else {
			name, body = body[:i], body[i+1:]
		}
		if len(name) == 0 {
			continue
		}
		dst = append(dst, name...)
		dst = append(dst, '\t')
		dst = s.infoValue(c, dst, string(name))
		dst = append(dst, '\n')
	}
	finishProto(dst, at, protoInfo)
	return dst
}

func (s *Server) infoValue(c *conn, dst []byte, name string) []byte {
	cmd, params, _ := strings.Cut(name, ":")
	switch cmd {
	case "node":
		return append(dst, s.nodeName...)
	case "build", "version":
		return append(dst, Version...)
	case "edition":
		return append(dst, "Aerospike Community Edition"...)
	case "cluster-name":
		if s.cfg.ClusterName == "" {
			return append(dst, "null"...)
		}
		return append(dst, s.cfg.ClusterName...)
	case "features":
		return append(dst, features...)
	case "partition-generation", "peers-generation", "cluster-generation":
		return append(dst, '1')
	case "partitions":
		return strconv.AppendInt(dst, nPartitions, 10)
	case "service", "service-clear-std", "service-clear-alt":
		return append(dst, c.nc.LocalAddr().String()...)
	case "services", "services-alumni", "services-alternate":
		return dst
	case "peers-clear-std", "peers-clear-alt", "peers-tls-std", "peers-tls-alt", "alumni-clear-std", "alumni-tls-std":
		port := "3000"
		if _, p, err := net.SplitHostPort(c.nc.LocalAddr().String()); err == nil {
			port = p
		}
		return append(dst, "1,"+port+",[]"...)
	case "replicas", "replicas-all", "replicas-master":
		for i, ns := range s.ns {
			if i > 0 {
				dst = append(dst, ';')
			}
			dst = append(dst, ns.name...)
			switch cmd {
			case "replicas":
				dst = append(dst, ":0,1,"...)
			case "replicas-all":
				dst = append(dst, ":1,"...)
			default:
				dst = append(dst, ':')
			}
			dst = append(dst, fullBitmap...)
		}
		return dst
	case "rack-ids":
		for i, ns := range s.ns {
			if i > 0 {
				dst = append(dst, ';')
			}
			dst = append(dst, ns.name...)
			dst = append(dst, ":0"...)
		}
		return dst
	case "namespaces":
		for i, ns := range s.ns {
			if i > 0 {
				dst = append(dst, ';')
			}
			dst = append(dst, ns.name...)
		}
		return dst
	case "statistics":
		st := s.Stats()
		dst = append(dst, "cluster_size=1;objects="...)
		dst = strconv.AppendInt(dst, st.Objects, 10)
		dst = append(dst, ";client_connections="...)
		dst = strconv.AppendInt(dst, st.Connections, 10)
		dst = append(dst, ";client_connections_opened="...)
		dst = strconv.AppendInt(dst, st.ConnsAccepted, 10)
		dst = append(dst, ";client_connections_bad="...)
		dst = strconv.AppendInt(dst, st.BadConnections, 10)
		dst = append(dst, ";requests="...)
		dst = strconv.AppendInt(dst, st.Requests, 10)
		dst = append(dst, ";info_requests="...)
		dst = strconv.AppendInt(dst, st.InfoRequests, 10)
		dst = append(dst, ";reclaimed_objects="...)
		dst = strconv.AppendInt(dst, st.Reclaimed, 10)
		dst = append(dst, ";uptime="...)
		return strconv.AppendInt(dst, int64(time.Since(s.started)/time.Second), 10)
	case "sets":
		for _, ns := range s.ns {
			dst = s.appendSets(dst, ns, "")
		}
		return dst
	case "truncate", "truncate-namespace":
		return s.infoTruncate(dst, cmd, params)
	}
	// Commands with a path: namespace/<ns>, sets/<ns>[/<set>].
	if rest, ok := strings.CutPrefix(name, "namespace/"); ok {
		ns := s.byName[rest]
		if ns == nil {
			return append(dst, "type=unknown"...) // as Aerospike 8.1
		}
		arena, dead := ns.memoryBytes()
		dst = append(dst, "objects="...)
		dst = strconv.AppendInt(dst, ns.objects.Load(), 10)
		dst = append(dst, ";replication-factor=1;default-ttl="...)
		dst = strconv.AppendInt(dst, int64(s.cfg.DefaultTTL/time.Second), 10)
		dst = append(dst, ";data_used_bytes="...)
		dst = strconv.AppendInt(dst, arena-dead, 10)
		dst = append(dst, ";arena_bytes="...)
		dst = strconv.AppendInt(dst, arena, 10)
		dst = append(dst, ";sets="...)
		dst = strconv.AppendInt(dst, int64(len(ns.sets())), 10)
		return append(dst, ";storage-engine=memory;strong-consistency=false"...)
	}
	if rest, ok := strings.CutPrefix(name, "sets/"); ok {
		nsName, set, _ := strings.Cut(rest, "/")
		ns := s.byName[nsName]
		if ns == nil {
			return append(dst, "ERROR:20:namespace not found"...)
		}
		return s.appendSets(dst, ns, set)
	}
	return append(dst, "ERROR:4:unrecognized command"...)
}

func (s *Server) appendSets(dst []byte, ns *namespace, only string) []byte {
	for i, name := range ns.sets() {
		if only != "" && name != only {
			continue
		}
		dst = append(dst, "ns="+ns.name+":set="+name+":objects="...)
		dst = strconv.AppendInt(dst, ns.setObjs[i+1].Load(), 10)
		dst = append(dst, ":tombstones=0;"...)
	}
	return dst
}

// infoTruncate handles truncate:namespace=X;set=Y[;lut=N] and
// truncate-namespace:namespace=X[;lut=N] (lut in Unix nanoseconds).
func (s *Server) infoTruncate(dst []byte, cmd, params string) []byte {
	var nsName, set, lut string
	for _, kv := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "namespace":
			nsName = v
		case "set":
			set = v
		case "lut":
			lut = v
		case "":
		default:
			return append(dst, "ERROR:4:unknown parameter "+k...)
		}
	}
	ns := s.byName[nsName]
	if ns == nil {
		return append(dst, "ERROR:20:namespace not found"...)
	}
	cutoff := s.now().UnixMilli()
	if lut != "" {
		n, err := strconv.ParseInt(lut, 10, 64)
		if err != nil || n < 0 {
			return append(dst, "ERROR:4:bad lut"...)
		}
		cutoff = n / int64(time.Millisecond)
	}
	all := cmd == "truncate-namespace" || set == ""
	var id uint16
	if !all {
		var ok bool
		if id, ok = ns.setID([]byte(set), false); !ok {
			return append(dst, "ok"...)
		}
	}
	n := ns.truncate(id, all, cutoff)
	if s.jr != nil {
		if err := s.jr.wait(s.jr.truncate(ns, set, all, cutoff)); err != nil {
			return append(dst, "ERROR:1:journal"...)
		}
	}
	s.log.Info("aslite truncate", "namespace", nsName, "set", set, "deleted", n)
	return append(dst, "ok"...)
}
