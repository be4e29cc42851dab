package diameter

import (
	"encoding/binary"
	"net"
	"os"
	"sync"
	"time"
)

// recordConn records the bytes of a TCP connection in both directions so
// a test can write them as a pcap when live capture is impossible.
type recordConn struct {
	net.Conn
	mu     sync.Mutex
	chunks []chunk
}

type chunk struct {
	out  bool // client → server
	data []byte
}

// Write records b before sending it: the answer can be read (and recorded)
// by the reader goroutine before a Write returns, which would put it ahead
// of its request in the pcap.
func (c *recordConn) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return c.Conn.Write(b)
	}
	c.mu.Lock()
	i := len(c.chunks)
	c.chunks = append(c.chunks, chunk{true, append([]byte(nil), b...)})
	c.mu.Unlock()
	n, err := c.Conn.Write(b)
	if n < len(b) {
		c.mu.Lock()
		c.chunks[i].data = c.chunks[i].data[:n]
		c.mu.Unlock()
	}
	return n, err
}

func (c *recordConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.add(false, b[:n])
	return n, err
}

func (c *recordConn) add(out bool, b []byte) {
	if len(b) == 0 {
		return
	}
	c.mu.Lock()
	c.chunks = append(c.chunks, chunk{out, append([]byte(nil), b...)})
	c.mu.Unlock()
}

// writePcap writes the recorded stream as a raw-IPv4 pcap: a handshake,
// then one PSH/ACK segment per recorded chunk (split at 1400 bytes).
func (c *recordConn) writePcap(path string, clientPort, serverPort uint16) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0xa1b2c3d4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 4)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 65535)
	b = binary.LittleEndian.AppendUint32(b, 101) // LINKTYPE_RAW
	ts := time.Now()
	seq := [2]uint32{1000, 5000} // client, server
	pkt := func(out bool, flags byte, payload []byte) {
		src, dst, sp, dp, s, a := 0, 1, clientPort, serverPort, seq[0], seq[1]
		if !out {
			src, dst, sp, dp, s, a = 1, 0, serverPort, clientPort, seq[1], seq[0]
		}
		_, _ = src, dst
		ip := make([]byte, 20, 40+len(payload))
		ip[0], ip[8], ip[9] = 0x45, 64, 6
		binary.BigEndian.PutUint16(ip[2:], uint16(40+len(payload)))
		copy(ip[12:], []byte{127, 0, 0, 1})
		copy(ip[16:], []byte{127, 0, 0, 1})
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[i:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
		tcp := make([]byte, 20)
		binary.BigEndian.PutUint16(tcp[0:], sp)
		binary.BigEndian.PutUint16(tcp[2:], dp)
		binary.BigEndian.PutUint32(tcp[4:], s)
		binary.BigEndian.PutUint32(tcp[8:], a)
		tcp[12], tcp[13] = 5<<4, flags
		binary.BigEndian.PutUint16(tcp[14:], 65535)
		frame := append(append(ip, tcp...), payload...)
		ts = ts.Add(100 * time.Microsecond)
		b = binary.LittleEndian.AppendUint32(b, uint32(ts.Unix()))
		b = binary.LittleEndian.AppendUint32(b, uint32(ts.Nanosecond()/1000))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(frame)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(frame)))
		b = append(b, frame...)
		adv := uint32(len(payload))
		if flags&0x02 != 0 {
			adv = 1
		}
		if out {
			seq[0] += adv
		} else {
			seq[1] += adv
		}
	}
	const syn, ack, psh = 0x02, 0x10, 0x08
	seq[0]--
	pkt(true, syn, nil)
	seq[1]--
	pkt(false, syn|ack, nil)
	pkt(true, ack, nil)
	for _, ch := range c.chunks {
		for d := ch.data; len(d) > 0; {
			n := min(len(d), 1400)
			pkt(ch.out, psh|ack, d[:n])
			d = d[n:]
		}
	}
	return os.WriteFile(path, b, 0o600)
}
