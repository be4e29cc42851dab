package driver

import "time"

// Notice is a notification the CHF sent about one flow's session: an
// Nchf ChargingNotify (REAUTHORIZATION or ABORT_CHARGING) posted to the
// notifyUri the create named, or a Gy RAR or ASR on the flow's peer. The
// engine answers it as an SMF or PGW would: an update for a
// re-authorisation, a release for an abort.
type Notice struct {
	// Flow is the Charge.Flow of the session's create.
	Flow uint64
	// Abort is set for ABORT_CHARGING (Gy ASR), clear for REAUTHORIZATION
	// (Gy RAR).
	Abort bool
	// Received is when the notification arrived.
	Received time.Time
}

// NoticeSink takes a notice. It is called on the driver's goroutines
// (a server's handler, a Diameter reader), so it must not block; false
// means it had no room, and the driver refuses the notification (Nchf:
// 503, which the CHF retries).
type NoticeSink func(Notice) bool

// Notifiable is implemented by drivers that receive CHF-initiated
// notifications.
type Notifiable interface {
	// SetNoticeSink routes the notifications to sink; it is called before
	// the first NewWorker, and returns false when the driver will deliver
	// none (the Nchf driver without a notify listener).
	SetNoticeSink(sink NoticeSink) bool
}

// Waker is implemented by Workers whose Poll another goroutine may end
// early: Wake is safe for concurrent use and makes the current (or the
// next) Poll return soon.
type Waker interface {
	Wake()
}
