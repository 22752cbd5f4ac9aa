package ui

import (
	"testing"

	"github.com/eimhq/eim"
)

// Every column the resource pages list is a field of its kind.
func TestResourceKindsFields(t *testing.T) {
	for _, rk := range resourceKinds {
		sc := eim.SchemaOf(rk.Kind)
		if sc == nil {
			t.Errorf("%s: no schema", rk.Kind)
			continue
		}
		for _, f := range rk.Fields {
			if _, ok := sc.Field(f); !ok {
				t.Errorf("%s: no field %q", rk.Kind, f)
			}
		}
	}
}
