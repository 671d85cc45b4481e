package symbolize

import (
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// maxMangledLen bounds the work spent on one name.
const maxMangledLen = 4096

// demangleName turns an Itanium C++ or Rust name into source form, and
// leaves any other name as it is.
func demangleName(name string) (plain string) {
	if len(name) > maxMangledLen || !(strings.HasPrefix(name, "_Z") || strings.HasPrefix(name, "_R")) {
		return name
	}
	defer func() {
		if recover() != nil {
			plain = name
		}
	}()
	return demangle.Filter(name)
}
