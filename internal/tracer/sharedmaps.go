//go:build linux

package tracer

import (
	"fmt"
	"reflect"

	"github.com/cilium/ebpf"
)

// The maps every object shares are exactly those of types.bpf.c, and the
// tracer holds them in bpf2go's typed struct (typesMaps): a map renamed
// in C fails the Go build instead of a lookup at run time.

// sharedMapNames are the shared maps' names, from typesMaps' tags.
var sharedMapNames = func() []string {
	var names []string
	rt := reflect.TypeFor[typesMaps]()
	for i := range rt.NumField() {
		names = append(names, rt.Field(i).Tag.Get("ebpf"))
	}
	return names
}()

// byName is what ebpf.CollectionOptions.MapReplacements wants: every
// shared map by its name in C, so an object's copy is replaced by it.
func (m *typesMaps) byName() map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	rv := reflect.ValueOf(m).Elem()
	for i, name := range sharedMapNames {
		out[name] = rv.Field(i).Interface().(*ebpf.Map)
	}
	return out
}

// createSharedMaps creates the shared maps as sharedMap shapes them. The
// loader closes whatever it made if one of them fails.
func (t *Tracer) createSharedMaps(spec *ebpf.CollectionSpec) error {
	for _, name := range sharedMapNames {
		ms, ok := spec.Maps[name]
		if !ok {
			return fmt.Errorf("map %s missing from BPF object", name)
		}
		spec.Maps[name] = t.sharedMap(name, ms)
	}
	var maps typesMaps
	if err := spec.LoadAndAssign(&maps, nil); err != nil {
		return wrapLoadErr(fmt.Errorf("create maps: %w", err))
	}
	t.maps, t.shared = maps, maps.byName()
	return nil
}
