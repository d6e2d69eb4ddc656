package counters

import (
	"encoding/json"
	"slices"
	"strconv"
)

// AppendJSON appends the snapshot as the JSON object encoding/json makes
// of it (the same keys and values; json.Unmarshal reads it back into an
// equal Snapshot) and returns the extended buffer. A worker publishes its
// counters after the batches it delivers, a batch a check at a fleet's
// trickle: encoding/json's reflection cost 5 µs a report there, a tenth of
// what the check itself cost a two-worker daemon; this costs a few hundred
// nanoseconds and no allocation beyond b's growth.
func (s *Snapshot) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	for _, f := range [...]struct {
		name string
		v    uint64
	}{
		{"Connections", s.Connections}, {"Refused", s.Refused}, {"Received", s.Received},
		{"HealthChecks", s.HealthChecks}, {"Incomplete", s.Incomplete},
	} {
		b = appendKey(b, f.name)
		b = strconv.AppendUint(b, f.v, 10)
	}
	b = strconv.AppendInt(appendKey(b, "Open"), s.Open, 10)
	b = strconv.AppendInt(appendKey(b, "Held"), s.Held, 10)
	for _, f := range [...]struct {
		name string
		v    uint64
	}{
		{"Chunks", s.Chunks}, {"BytesRead", s.BytesRead}, {"Validated", s.Validated},
		{"DecryptNanos", s.DecryptNanos}, {"Finished", s.Finished}, {"SinkDropped", s.SinkDropped},
		{"DialectLossy", s.DialectLossy},
	} {
		b = appendKey(b, f.name)
		b = strconv.AppendUint(b, f.v, 10)
	}
	b = appendCounts(b, "Emitted", s.Emitted, false)
	b = appendCounts(b, "Dropped", s.Dropped, false)
	b = appendCounts(b, "SinkErrors", s.SinkErrors, false)
	b = appendCounts(b, "FellBack", s.FellBack, false)
	b = appendCounts(b, "SinkDown", s.SinkDown, true)
	b = append(appendKey(b, "Latency"), '{')
	latency := len(b)
	if len(s.Latency.Buckets) > 0 {
		b = append(appendKey(b, "Buckets"), '[')
		for i, n := range s.Latency.Buckets {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, n, 10)
		}
		b = append(b, ']')
	}
	if s.Latency.SumNanos != 0 {
		if len(b) > latency {
			b = append(b, ',')
		}
		b = strconv.AppendUint(append(b, `"SumNanos":`...), s.Latency.SumNanos, 10)
	}
	b = append(b, '}')
	b = appendCounts(b, "SecretMatches", s.SecretMatches, true)
	b = appendCounts(b, "IdentityRefused", s.IdentityRefused, true)
	b = appendCounts(b, "FrontReceived", s.FrontReceived, true)
	b = appendCounts(b, "FrontRefused", s.FrontRefused, true)
	if len(s.Durable) > 0 {
		// Only with queue_directory, and a few destinations: the rare case
		// keeps encoding/json.
		d, _ := json.Marshal(s.Durable)
		b = append(appendKey(b, "Durable"), d...)
	}
	b = appendKey(b, "Queues")
	if s.Queues == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		var scratch [32]string
		for i, k := range appendSortedKeys(scratch[:0], s.Queues) {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(appendString(b, k), s.Queues[k], 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendKey appends an object's key, after a comma unless it is the first.
func appendKey(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendCounts appends a map of counters by name as encoding/json does: a
// nil map is null, or left out with omitEmpty, as is an empty one then.
func appendCounts(b []byte, name string, m map[string]uint64, omitEmpty bool) []byte {
	if omitEmpty && len(m) == 0 {
		return b
	}
	b = appendKey(b, name)
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	var scratch [32]string
	for i, k := range appendSortedKeys(scratch[:0], m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(appendString(b, k), m[k], 10)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string and a colon: names of sinks,
// reasons and queues are plain ASCII, and anything else (an identity's
// name is the operator's to choose) is left to encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(append(b, q...), ':')
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"', ':')
}

// appendSortedKeys appends m's keys to keys, sorted (as encoding/json
// sorts them); keys may be a caller's scratch on its stack.
func appendSortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
