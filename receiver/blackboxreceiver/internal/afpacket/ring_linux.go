package afpacket

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is a TPACKET_V3 receive ring: the kernel writes packets into blocks of
// a memory-mapped buffer and hands a block over when it is full or after
// blockTimeout; reading a packet then costs no system call.
type ring struct {
	mem       []byte
	blockSize int
	blocks    int
	cur       int // block being read
	inBlock   bool
	left      int // packets left in the current block
	next      int // offset of the next packet in the current block
	loopbacks map[int]bool
}

// Offsets in struct tpacket_block_desc (version, offset_to_priv, then
// tpacket_hdr_v1) and struct tpacket3_hdr.
const (
	blkStatus      = 8
	blkNumPkts     = 12
	blkFirstPkt    = 16
	pktNextOffset  = 0
	pktSec         = 4
	pktNsec        = 8
	pktSnaplen     = 12
	pktLen         = 16
	pktNet         = 26
	pktHdrAligned  = 48 // TPACKET_ALIGN(sizeof(struct tpacket3_hdr)): the sockaddr_ll follows
	sllIfindex     = 4
	sllPkttype     = 10
	blockTimeoutMs = 10
)

// setupRing switches fd to TPACKET_V3 and maps a ring of about size bytes in
// blocks that hold the largest packet.
func setupRing(fd, size, snaplen int) (*ring, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, fmt.Errorf("TPACKET_V3: %w", err)
	}
	blockSize := 1 << 20
	for blockSize < snaplen+4096 {
		blockSize <<= 1
	}
	blocks := max(size/blockSize, 4)
	frameSize := 2048
	req := unix.TpacketReq3{
		Block_size: uint32(blockSize), Block_nr: uint32(blocks),
		Frame_size: uint32(frameSize), Frame_nr: uint32(blockSize / frameSize * blocks),
		Retire_blk_tov: blockTimeoutMs,
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, fmt.Errorf("PACKET_RX_RING: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, blockSize*blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return &ring{mem: mem, blockSize: blockSize, blocks: blocks}, nil
}

func (r *ring) status(b int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.mem[b*r.blockSize+blkStatus]))
}

// read returns the next packet, or ok false when the current block is not
// ready (the caller polls). The packet stays valid until the next read.
func (r *ring) read() (pkt []byte, ts int64, cut int, ok bool) {
	for {
		if !r.inBlock {
			if atomic.LoadUint32(r.status(r.cur))&unix.TP_STATUS_USER == 0 {
				return nil, 0, 0, false
			}
			base := r.cur * r.blockSize
			r.inBlock = true
			r.left = int(binary.NativeEndian.Uint32(r.mem[base+blkNumPkts:]))
			r.next = base + int(binary.NativeEndian.Uint32(r.mem[base+blkFirstPkt:]))
		}
		if r.left == 0 {
			// Hand the block back and move on.
			atomic.StoreUint32(r.status(r.cur), unix.TP_STATUS_KERNEL)
			r.inBlock = false
			r.cur = (r.cur + 1) % r.blocks
			continue
		}
		h := r.mem[r.next:]
		end := r.cur*r.blockSize + r.blockSize
		r.left--
		if next := binary.NativeEndian.Uint32(h[pktNextOffset:]); next != 0 {
			r.next += int(next)
		} else {
			r.left = 0
		}
		sll := h[pktHdrAligned:]
		if sll[sllPkttype] == unix.PACKET_OUTGOING && r.loopbacks[int(int32(binary.NativeEndian.Uint32(sll[sllIfindex:])))] {
			continue // loopback: keep the arrival only
		}
		snap := int(binary.NativeEndian.Uint32(h[pktSnaplen:]))
		full := int(binary.NativeEndian.Uint32(h[pktLen:]))
		net := int(binary.NativeEndian.Uint16(h[pktNet:]))
		if net+snap > len(h) || (len(r.mem)-len(h))+net+snap > end {
			continue // malformed descriptor: never trust the ring blindly
		}
		ts = int64(binary.NativeEndian.Uint32(h[pktSec:]))*1e9 + int64(binary.NativeEndian.Uint32(h[pktNsec:]))
		return h[net : net+snap : net+snap], ts, full - snap, true
	}
}

func (r *ring) close() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}
