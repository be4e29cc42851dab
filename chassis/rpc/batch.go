package rpc

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// Batches carry several requests of one kind in one internal call (CGW →
// OCP: chf.ChargeRequests, OCP → ABM: chf.ApplyRequests), so that under
// load one round trip serves many charging events.
//
// Wire format (msgpack): a request batch is an array of the requests'
// own encodings; the reply is an array with one entry per request, in
// order, each a 3-array [status, error, response]: status 0 means the
// request was served and response is its response message; otherwise status
// is the HTTP status the request alone would have been answered with
// (400, 500, 502, 503, 504) and error says why.

// MaxBatch bounds the requests of one batch a service accepts.
const MaxBatch = 1024

// MaxBatchBody bounds the encoded body of one batch a BatchClient sends:
// a batch that encodes larger leaves as two halves (each split again if
// need be), so that a batch of large requests is not refused whole by
// its peer. MaxBodySize is the request body a service behind a
// BatchClient accepts: MaxBatchBody plus 128 KiB of headroom. A lone
// request, which is never split, is far smaller (the CGW takes Nchf
// bodies of up to 64 KiB, and their msgp form is smaller still).
const (
	MaxBatchBody = 512 << 10
	MaxBodySize  = MaxBatchBody + 128<<10
)

// AppendBatchHeader starts a batch of n requests or reply items.
func AppendBatchHeader(b []byte, n int) []byte {
	return msgp.AppendArrayHeader(b, uint32(n))
}

// ReadBatchHeader reads the header written by AppendBatchHeader and
// checks the count against MaxBatch.
func ReadBatchHeader(b []byte) (n int, rest []byte, err error) {
	sz, rest, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return 0, b, fmt.Errorf("batch header: %w", err)
	}
	if sz == 0 || sz > MaxBatch {
		return 0, b, fmt.Errorf("batch of %d requests (allowed 1..%d)", sz, MaxBatch)
	}
	return int(sz), rest, nil
}

// AppendBatchItem appends one reply item: resp when status is 0, else the
// status and errMsg.
func AppendBatchItem(b []byte, status int, errMsg string, resp Message) ([]byte, error) {
	b = msgp.AppendArrayHeader(b, 3)
	b = msgp.AppendUint16(b, uint16(status))
	b = msgp.AppendString(b, errMsg)
	if status != 0 || resp == nil {
		return msgp.AppendNil(b), nil
	}
	return resp.MarshalMsg(b)
}

// ReadBatchItem reads one reply item into resp (reset first, keeping its
// buffers). errMsg
// is empty when status is 0.
func ReadBatchItem(b []byte, resp Message) (status int, errMsg string, rest []byte, err error) {
	sz, b, err := msgp.ReadArrayHeaderBytes(b)
	if err != nil {
		return 0, "", b, fmt.Errorf("batch item: %w", err)
	}
	if sz != 3 {
		return 0, "", b, fmt.Errorf("batch item of %d fields, want 3", sz)
	}
	st, b, err := msgp.ReadUint16Bytes(b)
	if err != nil {
		return 0, "", b, fmt.Errorf("batch item status: %w", err)
	}
	msg, b, err := msgp.ReadStringZC(b)
	if err != nil {
		return 0, "", b, fmt.Errorf("batch item error: %w", err)
	}
	if st != 0 {
		if msgp.IsNil(b) {
			b, err = msgp.ReadNilBytes(b)
		} else {
			b, err = msgp.Skip(b)
		}
		if err != nil {
			return 0, "", b, fmt.Errorf("batch item response: %w", err)
		}
		return int(st), string(msg), b, nil
	}
	resp.Reset()
	b, err = resp.UnmarshalMsg(b)
	if err != nil {
		return 0, "", b, fmt.Errorf("batch item response: %w", err)
	}
	return 0, "", b, nil
}

// ReadBatchReply reads a reply of n items: each served item is decoded
// into resp(i); for each failed one fail(i, status, errMsg) is called.
func ReadBatchReply[P Message](b []byte, n int, resp func(i int) P, fail func(i, status int, errMsg string)) error {
	got, b, err := ReadBatchHeader(b)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("batch reply of %d items for %d requests", got, n)
	}
	for i := 0; i < n; i++ {
		st, msg, rest, err := ReadBatchItem(b, resp(i))
		if err != nil {
			return fmt.Errorf("batch reply item %d: %w", i, err)
		}
		if st != 0 {
			fail(i, st, msg)
		}
		b = rest
	}
	return nil
}

// Message is what the RPC carries, requests and responses (chf's
// ChargeRequest, ApplyRequest and ChargeResponse): msgp-encoded, with a
// Reset that empties it and keeps its buffers for the next decode.
type Message interface {
	MarshalMsg([]byte) ([]byte, error)
	UnmarshalMsg([]byte) ([]byte, error)
	Reset()
}

// Repeatable is implemented by requests that can say whether they are
// safe to send again: the peer answers a repeat as it answered the first
// (the CHF's requests carry an identity the ABM keeps). A round trip whose
// every request is repeatable is retried by the chassis after failures
// that may have reached the peer (peer.Client.DoIdempotent); any other
// only when it never reached it.
type Repeatable interface {
	Repeatable() bool
}
