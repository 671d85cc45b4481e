//go:build linux

package tracer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// signature is a tracepoint's argument list as the running kernel declares
// it, without the leading __data pointer. names is nil when the kernel's
// BTF does not name the arguments (events defined from a shared class).
type signature struct {
	types []btf.Type
	names []string
}

func (s *signature) named() bool { return s.names != nil }

func (s *signature) String() string {
	var parts []string
	for i, t := range s.types {
		p := typeName(t)
		if s.named() && s.names[i] != "" {
			p += " " + s.names[i]
		}
		parts = append(parts, p)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func typeName(t btf.Type) string {
	switch t := t.(type) {
	case *btf.Pointer:
		return typeName(t.Target) + " *"
	case *btf.Typedef:
		return t.Name
	case *btf.Const:
		return "const " + typeName(t.Type)
	case *btf.Volatile:
		return typeName(t.Type)
	case nil:
		return "void"
	}
	if n := t.TypeName(); n != "" {
		return n
	}
	return fmt.Sprintf("%T", t)
}

var errNoTracepoint = errors.New("tracepoint not in this kernel")

// tracepointSignature reads a tracepoint's arguments from kernel BTF: the
// btf_trace_<name> typedef gives the types; __bpf_trace_<name>, when the
// event has its own class, gives the names.
func tracepointSignature(spec *btf.Spec, name string) (*signature, error) {
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_"+name, &td); err != nil {
		return nil, fmt.Errorf("%s: %w", name, errNoTracepoint)
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return nil, fmt.Errorf("%s: unexpected btf_trace typedef %T", name, td.Type)
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok || len(proto.Params) == 0 {
		return nil, fmt.Errorf("%s: unexpected btf_trace prototype", name)
	}
	sig := &signature{}
	for _, p := range proto.Params[1:] {
		sig.types = append(sig.types, p.Type)
	}
	var fn *btf.Func
	if err := spec.TypeByName("__bpf_trace_"+name, &fn); err == nil {
		if fp, ok := fn.Type.(*btf.FuncProto); ok && len(fp.Params) == len(proto.Params) {
			for _, p := range fp.Params[1:] {
				sig.names = append(sig.names, p.Name)
			}
		}
	}
	return sig, nil
}

// enumNames maps the values of a kernel enum to short lower-case names,
// taking the first name for each value that carries prefix: MR_NUMA_MISPLACED
// becomes numa_misplaced. Values differ between kernels, so they are always
// read from the running kernel.
func enumNames(spec *btf.Spec, enum, prefix string) map[int64]string {
	out := map[int64]string{}
	var e *btf.Enum
	if err := spec.TypeByName(enum, &e); err != nil {
		return out
	}
	for _, v := range e.Values {
		short, ok := strings.CutPrefix(v.Name, prefix)
		if !ok {
			continue
		}
		if _, dup := out[int64(v.Value)]; dup {
			continue
		}
		out[int64(v.Value)] = strings.ToLower(short)
	}
	return out
}
