package web

import "sync"

// FragRing holds the newest fragmentation samples, at most its capacity:
// the history the fragmentation chart draws, bounded however long the
// server runs. It is safe for concurrent use.
type FragRing struct {
	mu   sync.Mutex
	buf  []FragSample
	next int // where the next sample goes once buf is full
}

// NewFragRing returns a ring that keeps the newest size samples (at least
// one).
func NewFragRing(size int) *FragRing {
	return &FragRing{buf: make([]FragSample, 0, max(size, 1))}
}

// Add records s, dropping the oldest sample when the ring is full.
func (r *FragRing) Add(s FragSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, s)
		return
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
}

// Samples returns the samples held, oldest first.
func (r *FragRing) Samples() []FragSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]FragSample, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
