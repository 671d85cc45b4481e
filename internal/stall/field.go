package stall

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Field is one detail of a stall as the outputs print it. A Field returns
// a value only where it applies; a legitimate zero (order 0, node 0, a
// lock not acquired) is still printed unless the field is omitted when
// zero.
type Field struct {
	Key string
	// Append adds the field's JSON value to b and reports whether the
	// event has the field at all.
	Append func(b []byte, e *Event) ([]byte, bool)
}

func intField(key string, get func(*Event) int64) Field {
	return Field{key, func(b []byte, e *Event) ([]byte, bool) { return strconv.AppendInt(b, get(e), 10), true }}
}

func uintField(key string, omitZero bool, get func(*Event) uint64) Field {
	return Field{key, func(b []byte, e *Event) ([]byte, bool) {
		v := get(e)
		if omitZero && v == 0 {
			return b, false
		}
		return strconv.AppendUint(b, v, 10), true
	}}
}

func boolField(key string, omitFalse bool, get func(*Event) bool) Field {
	return Field{key, func(b []byte, e *Event) ([]byte, bool) {
		v := get(e)
		if omitFalse && !v {
			return b, false
		}
		return strconv.AppendBool(b, v), true
	}}
}

func stringField(key string, get func(*Event) string) Field {
	return Field{key, func(b []byte, e *Event) ([]byte, bool) {
		v := get(e)
		if v == "" {
			return b, false
		}
		return AppendJSONString(b, v), true
	}}
}

// AppendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it, so hand-built lines read like marshalled ones.
func AppendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// The detail fields. Every cause starts with the CPU and ends with the
// nesting flag; its descriptor lists the ones in between.
var (
	fieldCPU       = uintField("cpu", false, func(e *Event) uint64 { return uint64(e.CPU) })
	fieldOrder     = intField("order", func(e *Event) int64 { return int64(e.Order) })
	fieldGFP       = Field{"gfp", func(b []byte, e *Event) ([]byte, bool) { return AppendJSONString(b, fmt.Sprintf("%#x", e.GFP)), true }}
	fieldPages     = uintField("pages", false, func(e *Event) uint64 { return e.Pages })
	fieldNode      = intField("node", func(e *Event) int64 { return int64(e.Node) })
	fieldCgroup    = uintField("cgroup_id", false, func(e *Event) uint64 { return e.CgroupID })
	fieldSoftLimit = boolField("softlimit", true, func(e *Event) bool { return e.SoftLimit })
	fieldPriority  = stringField("priority", func(e *Event) string { return e.Mode })
	fieldStatus    = stringField("status", func(e *Event) string { return e.Status })
	fieldPass      = uintField("pass", true, func(e *Event) uint64 { return uint64(e.Pass) })
	fieldAttempt   = uintField("attempt_ns", true, func(e *Event) uint64 { return e.AttemptNs })
	fieldReason    = stringField("reason", func(e *Event) string { return e.Reason })
	fieldMode      = stringField("mode", func(e *Event) string { return e.Mode })
	fieldMove      = stringField("move", func(e *Event) string { return e.Move() })
	fieldSrcCPU    = intField("src_cpu", func(e *Event) int64 { return int64(e.SrcCPU) })
	fieldDstCPU    = intField("dst_cpu", func(e *Event) int64 { return int64(e.DstCPU) })
	fieldSrcNode   = intField("src_node", func(e *Event) int64 { return int64(e.Node) })
	fieldDstNode   = intField("dst_node", func(e *Event) int64 { return int64(e.DstNode) })
	fieldOtherTID  = uintField("other_tid", true, func(e *Event) uint64 { return uint64(e.OtherTID) })
	fieldWrite     = boolField("write", false, func(e *Event) bool { return e.Write })
	fieldAcquired  = boolField("acquired", false, func(e *Event) bool { return e.Acquired })
	fieldDirty     = uintField("dirty_pages", false, func(e *Event) uint64 { return e.Pages })
	fieldLimit     = uintField("limit_pages", false, func(e *Event) uint64 { return e.Limit })
	fieldNested    = boolField("nested", true, func(e *Event) bool { return e.Nested })
)

// fields puts a cause's own fields between the CPU and the nesting flag.
func fields(own ...Field) []Field {
	return append(append([]Field{fieldCPU}, own...), fieldNested)
}

// Move names a NUMA task move: move, swap, or stick (a move that failed).
func (e *Event) Move() string {
	switch {
	case e.Swap:
		return "swap"
	case e.Stick:
		return "stick"
	}
	return "move"
}

// AppendDetails appends the event's detail fields to b as `"key":value`
// pairs, each preceded by a comma.
func (e *Event) AppendDetails(b []byte) []byte {
	for _, f := range e.Cause.Desc().Fields {
		mark := len(b)
		b = append(b, ',')
		b = AppendJSONString(b, f.Key)
		b = append(b, ':')
		var ok bool
		if b, ok = f.Append(b, e); !ok {
			b = b[:mark]
		}
	}
	return b
}
