package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ResultLogMarker starts the line that carries a run's result in its log
// (loadgen run --result-log): the marker, then the Result as compact JSON,
// then a newline. A collector that can read a pod's log through the API
// (pods/log, `kubectl logs`) needs no volume, copy or holder container.
const ResultLogMarker = "LOADGEN-RESULT "

// ErrNoResultLog is returned by ParseResultLog when no line carries a
// result.
var ErrNoResultLog = errors.New("report: no " + ResultLogMarker + "line in the log")

// WriteResultLog writes r to w as one line: ResultLogMarker and r as
// compact JSON. It makes a single Write call, so that the line is not
// interleaved with other writers of w that write whole lines too.
func WriteResultLog(w io.Writer, r *Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("cannot encode result: %w", err)
	}
	line := make([]byte, 0, len(ResultLogMarker)+len(b)+1)
	line = append(append(append(line, ResultLogMarker...), b...), '\n')
	if _, err := w.Write(line); err != nil {
		return fmt.Errorf("cannot write result line: %w", err)
	}
	return nil
}

// ParseResultLog reads a log (a container's output as `kubectl logs` or
// the pods/log API give it, any other lines mixed in) and returns the
// result of its last ResultLogMarker line, checking its schema version as
// ReadJSON does. The marker may follow a prefix on its line (such as a
// timestamp that `kubectl logs --timestamps` adds). Lines are read up to
// MaxFileBytes. It returns ErrNoResultLog when no line has the marker, and
// an error naming the line when the last one does not decode.
func ParseResultLog(r io.Reader) (*Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxFileBytes)
	var last []byte
	lastLine, n := 0, 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		i := bytes.Index(line, []byte(ResultLogMarker))
		if i < 0 {
			continue
		}
		last = append(last[:0], line[i+len(ResultLogMarker):]...)
		lastLine = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read result log: %w", err)
	}
	if lastLine == 0 {
		return nil, ErrNoResultLog
	}
	var res Result
	dec := json.NewDecoder(bytes.NewReader(last))
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("cannot decode the result on log line %d: %w", lastLine, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("cannot decode the result on log line %d: trailing data after the JSON", lastLine)
	}
	if res.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%w %d on log line %d (want %d)", ErrSchema, res.SchemaVersion, lastLine, SchemaVersion)
	}
	return &res, nil
}
