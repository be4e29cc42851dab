package compare

import (
	"bytes"
	"strings"
)

// bytesBuffer collects an SVG document.
type bytesBuffer struct{ bytes.Buffer }

// svg returns the document without its XML prolog, ready to inline.
func (b *bytesBuffer) svg() string {
	s := b.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return s
}
