// Package queue is a durable, disk-backed FIFO queue of opaque records: one
// per remote destination (Icinga 2's API, Gearman), holding the results that
// the engine could not take at once until it takes them, across restarts and
// kill -9.
//
// # What it owns
//
// A Queue owns one directory (created 0750 if missing) and every file in
// it: segment files named by a 20-digit decimal id and ".seg"
// ("00000000000000000001.seg"), the file "ack" with the acknowledged
// position, and the file "lock", held with flock(2) while the queue is open
// so that no two queues (in one process or two) share the directory. Other
// files are left alone. Records are opaque bytes: how a destination encodes
// its results is its own business (put a version byte in them if the
// encoding may change).
//
// # Use
//
// The writer appends; the reader peeks at the oldest records, delivers
// them, and acknowledges the ones the engine accepted:
//
//	n, err := q.Append(recs...)    // recs[n:] go to the fallback; errors.Is(err, ErrFull)
//
//	for {
//		recs, err := q.Peek(256)
//		if len(recs) == 0 {        // empty (or err): wait for an Append
//			select { case <-q.Ready(): case <-ctx.Done(): return }
//			continue
//		}
//		n := deliver(recs)         // how many, from the first, the engine took
//		q.Ack(n)
//		if n < len(recs) { backOff() }  // Peek returns recs[n:] again
//	}
//
// Append is for one writer goroutine and Peek/Ack for one reader goroutine,
// which may run at the same time; Stats, Ready and Close may be called from
// any goroutine.
//
// # On-disk format
//
// All integers are little-endian; checksums are CRC-32C (Castagnoli).
//
// A segment file starts with a 16-byte header:
//
//	0  8  magic "NSCAQSEG"
//	8  4  format version, 1
//	12 4  CRC-32C of bytes 0..12
//
// followed by records, each a 24-byte header and the data:
//
//	0  4  magic "NQRC"
//	4  4  data length (at most MaxRecordBytes)
//	8  8  append time, Unix nanoseconds
//	16 4  CRC-32C of the data
//	20 4  CRC-32C of bytes 0..20 of this header
//	24 n  data
//
// Records are only ever appended, to the newest segment; past
// Options.SegmentBytes the writer starts the next id. A new Queue never
// appends to a segment it found at Open: it starts a new one, so a torn
// tail from a crash stays where it is and is skipped.
//
// The ack file holds two 32-byte slots, written alternately, so that a torn
// write of one leaves the other:
//
//	0  4  magic "NQAK"
//	4  8  write counter: the valid slot with the higher one is current
//	12 8  segment id of the first unacknowledged byte
//	20 8  offset of the first unacknowledged byte in that segment
//	28 4  CRC-32C of bytes 0..28
//
// Segments with a lower id than the acknowledged one are deleted, by Ack
// and by Open, and so is a segment no one appends to once the reader has
// passed its end. They are deleted before the ack file is written: removing
// a file needs no space, and a deleted segment cannot come again whether or
// not the write succeeds. The ack file's blocks are allocated when the
// queue opens (fallocate, keeping its size), so that rewriting a slot in
// place needs no space either; until they are, Append stores nothing
// (ENOSPC goes to the caller's fallback), as records stored then could not
// be acknowledged durably. (On a copy-on-write file system a rewrite needs
// new blocks all the same; there the removal of segments is what frees
// space first.)
//
// # Damage
//
// Open reads every unacknowledged record and checks both checksums; the
// reader checks them again. A record whose header verifies but whose data
// does not is skipped by its length. A header that does not verify, or a
// record cut off by the end of its file (a torn tail, a truncated file), is
// skipped up to the next offset holding a verifying header whose record fits
// in the file. Each such region counts once in Stats.Corrupt (whether Open or
// the reader finds it) and is passed once to Options.OnDamage with what it
// cost, and the records after it, in that segment and the later ones, are
// delivered as usual. The cost is known for a segment this Queue wrote or
// scanned at Open: it counts each segment's records, and once the reader has
// passed a segment's end, the records it did not read are the cost of the
// damage found in it (Stats.Lost); a record whose header verified costs one.
// Damage found at Open costs an unknown number (Stats.LostUnknown). A segment
// file removed under the queue is damage too: the reader moves on past it,
// the writer notices (no link left) and starts a new one, and what was left
// unacknowledged in it is counted at Close (the reader may still deliver
// from a file it has open). A bad segment header counts, and the
// records behind it are read all the same. A damaged ack file counts, and
// delivery starts again from the oldest segment. Nothing in a file's
// contents makes the queue panic.
//
// # Guarantees
//
// Order: records come out in the order appended, across segments and
// restarts. Delivery is at least once: a record leaves the queue only when
// acknowledged, and the acknowledged position is written to the ack file by
// every Ack (Peek writes it too when it passed only segment ends or
// damage). A record that was peeked but not acknowledged when the process
// died is delivered again after Open: the window is the records between the
// engine's acceptance and the Ack call, one delivery batch. The position is
// written with pwrite(2) and survives the death of the process at any
// moment; whether it survives a power loss depends on the policy, and if
// it does not, acknowledged records come again (duplicates, never loss).
//
// What an Append has stored, once Append returned, is never lost by the
// death of the process (kill -9, a crash, the OOM killer) under any policy:
// it is in the kernel's page cache. A power loss or kernel crash may cost:
//
//   - FsyncNever: everything the kernel had not yet written back (typically
//     the last 30 seconds or so of appends, dirty_expire_centisecs), and the
//     last acknowledgements (those records come again). A segment may come
//     back short or with zeroes in its tail: skipped and counted as damage.
//   - FsyncBatch (default): nothing that Append returned for: each Append
//     call is written and synced (fsync of the segment, and of the directory
//     when a segment is created) before it returns, so at most the records
//     of the Append calls in progress, which their caller had not been told
//     were stored. Acknowledgements since the last sync of the ack file (at
//     Close) may be lost: those records come again.
//   - FsyncAlways: as batch, but each record is synced on its own, so an
//     Append in progress has stored its first records; and each Ack is
//     synced, so no acknowledged record comes again.
//
// A record is visible to the reader only once it is written and synced as
// the policy says, so under batch and always no record is delivered that a
// power loss could take back.
//
// Bounds: Options.MaxBytes bounds Stats.Bytes, the unacknowledged bytes;
// Append stores the records that fit and returns ErrFull for the rest, for
// the caller to send to its fallback. The files hold at most about one
// segment more than that.
package queue
