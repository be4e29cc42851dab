package chf

import (
	"context"
	"fmt"
	"slices"

	"github.com/tinylib/msgp/msgp"
)

// Batches carry several requests of one kind in one internal call (CGW →
// OCP: ChargeRequests, OCP → ABM: ApplyRequests), so that under load one
// round trip serves many charging events.
//
// Wire format (msgpack): a request batch is an array of the requests'
// own encodings; the reply is an array with one entry per request, in
// order, each a 3-array [status, error, response]: status 0 means the
// request was served and response is its ChargeResponse; otherwise status
// is the HTTP status the request alone would have been answered with
// (400, 500, 502, 503, 504) and error says why.

// MaxBatch bounds the requests of one batch a service accepts.
const MaxBatch = 1024

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
func AppendBatchItem(b []byte, status int, errMsg string, resp *ChargeResponse) ([]byte, error) {
	b = msgp.AppendArrayHeader(b, 3)
	b = msgp.AppendUint16(b, uint16(status))
	b = msgp.AppendString(b, errMsg)
	if status != 0 || resp == nil {
		return msgp.AppendNil(b), nil
	}
	return resp.MarshalMsg(b)
}

// ReadBatchItem reads one reply item into resp (its Lines reused). errMsg
// is empty when status is 0.
func ReadBatchItem(b []byte, resp *ChargeResponse) (status int, errMsg string, rest []byte, err error) {
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
	resp.Lines = resp.Lines[:0]
	b, err = resp.UnmarshalMsg(b)
	if err != nil {
		return 0, "", b, fmt.Errorf("batch item response: %w", err)
	}
	return 0, "", b, nil
}

// ReadBatchReply reads a reply of n items: each served item is decoded
// into resp(i); for each failed one fail(i, status, errMsg) is called.
func ReadBatchReply(b []byte, n int, resp func(i int) *ChargeResponse, fail func(i, status int, errMsg string)) error {
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

// Request is what a batch carries: ChargeRequest (CGW → OCP) or
// ApplyRequest (OCP → ABM).
type Request interface {
	MarshalMsg([]byte) ([]byte, error)
	UnmarshalMsg([]byte) ([]byte, error)
	Reset()
}

// Call is one request waiting in a client-side batch (chassis.Batcher).
type Call[R Request] struct {
	Req  R
	Resp *ChargeResponse
	Err  error
}

// Poster posts body to path on a peer and returns its answer appended to
// dst (chassis.Client.Do).
type Poster func(ctx context.Context, path string, body, dst []byte) ([]byte, error)

// CallBuffers is the reusable memory of sendCalls.
type CallBuffers struct{ body, reply []byte }

// sendCalls sends calls as one round trip: alone on single, else as a
// batch on batch. A failed round trip fails every call with wrap(err); an
// item the peer failed gets failed(status, its error message).
func sendCalls[R Request](ctx context.Context, post Poster, single, batch string, calls []*Call[R], b *CallBuffers,
	wrap func(error) error, failed func(status int, msg string) error) {
	fail := func(err error) {
		for _, c := range calls {
			c.Err = err
		}
	}
	var err error
	path := single
	if len(calls) == 1 {
		b.body, err = calls[0].Req.MarshalMsg(b.body[:0])
	} else {
		path = batch
		b.body = AppendBatchHeader(b.body[:0], len(calls))
		for _, c := range calls {
			if b.body, err = c.Req.MarshalMsg(b.body); err != nil {
				break
			}
		}
	}
	if err != nil {
		fail(wrap(fmt.Errorf("cannot encode request: %w", err)))
		return
	}
	b.reply, err = post(ctx, path, b.body, b.reply[:0])
	if err != nil {
		fail(wrap(err))
		return
	}
	if len(calls) == 1 {
		resp := calls[0].Resp
		resp.Lines = resp.Lines[:0]
		if _, err := resp.UnmarshalMsg(b.reply); err != nil {
			fail(wrap(fmt.Errorf("cannot decode response: %w", err)))
		}
		return
	}
	err = ReadBatchReply(b.reply, len(calls),
		func(i int) *ChargeResponse { return calls[i].Resp },
		func(i, status int, msg string) { calls[i].Err = wrap(failed(status, msg)) })
	if err != nil {
		fail(wrap(fmt.Errorf("cannot decode batch response: %w", err)))
	}
}

// Batch is the server side of a batch call, reusable: Decode fills Reqs,
// the service fills Resps and Errs, AppendReply encodes the answer.
type Batch[T any, R interface {
	*T
	Request
}] struct {
	reqs  []T
	resps []ChargeResponse
	Reqs  []R
	Resps []*ChargeResponse
	Errs  []error
}

// Decode reads a batch of requests from body.
func (b *Batch[T, R]) Decode(body []byte) error {
	n, rest, err := ReadBatchHeader(body)
	if err != nil {
		return err
	}
	b.reqs = slices.Grow(b.reqs[:0], n)[:n]
	b.resps = slices.Grow(b.resps[:0], n)[:n]
	b.Reqs, b.Resps, b.Errs = b.Reqs[:0], b.Resps[:0], b.Errs[:0]
	for i := range n {
		r := R(&b.reqs[i])
		r.Reset()
		if rest, err = r.UnmarshalMsg(rest); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		b.Reqs = append(b.Reqs, r)
		b.Resps = append(b.Resps, &b.resps[i])
		b.Errs = append(b.Errs, nil)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d trailing bytes after %d requests", len(rest), n)
	}
	return nil
}

// AppendReply appends the answer: each request's response, or
// status(its error) and the error's text.
func (b *Batch[T, R]) AppendReply(dst []byte, status func(error) int) []byte {
	dst = AppendBatchHeader(dst, len(b.Reqs))
	for i, e := range b.Errs {
		if e != nil {
			dst, _ = AppendBatchItem(dst, status(e), e.Error(), nil)
		} else {
			dst, _ = AppendBatchItem(dst, 0, "", b.Resps[i])
		}
	}
	clear(b.Reqs)
	clear(b.Resps)
	clear(b.Errs)
	return dst
}
