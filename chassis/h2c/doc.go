// Package h2c is a lean HTTP/2 cleartext (prior knowledge, RFC 9113)
// server and client built on golang.org/x/net/http2's Framer and
// golang.org/x/net/http2/hpack's encoder, with an HPACK decoder of its own
// that does not allocate.
//
// It trades generality for CPU per request: one reader goroutine per
// connection, every outgoing frame appended to one buffer that a writer
// goroutine flushes with a single write (so frames produced together share
// a syscall), HPACK header blocks encoded with a per-connection encoder
// whose indexed fields cost one byte after first use, pooled streams and
// buffers, and no reflection.
//
// The Server serves the CGW's Nchf front (Sniff lets one listener serve
// both HTTP/2 prior knowledge and HTTP/1.1); Conn is loadgen's Nchf
// client. See README.md for the data flow, limits and measurements.
//
// Buffer ownership: a Handler's *Request and *Response, and every slice
// they expose, are valid only until the Handler returns. A client request's
// Path is read during the call and its Body until the response completes;
// the *ClientResponse is written by the connection until then.
package h2c
