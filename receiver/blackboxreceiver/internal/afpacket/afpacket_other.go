//go:build !linux

// Package afpacket captures packets with AF_PACKET, which only Linux has.
package afpacket

import (
	"errors"
	"time"

	"golang.org/x/net/bpf"
)

// Config configures a capture handle.
type Config struct {
	Interface  string
	Snaplen    int
	BufferSize int
	Filter     []bpf.RawInstruction
	Timeout    time.Duration
	NoRing     bool
}

// ErrTimeout is returned by Read when no packet came within Config.Timeout.
var ErrTimeout = errors.New("afpacket: timeout")

// Handle is an open capture socket.
type Handle struct{}

// Open fails: AF_PACKET is Linux only.
func Open(Config) (*Handle, error) { return nil, errors.New("afpacket: live capture needs Linux") }

// Read is never reached.
func (*Handle) Read() ([]byte, int64, int, error) { return nil, 0, 0, ErrTimeout }

// Stats is never reached.
func (*Handle) Stats() (uint64, uint64, error) { return 0, 0, nil }

// Close is never reached.
func (*Handle) Close() error { return nil }
