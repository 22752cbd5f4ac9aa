package oscatalog_test

import (
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oscatalog"
)

// The OS resources of the shipped profiles pass the inventory's
// validation, which the catalog's writes go through.
func TestShippedProfilesValidate(t *testing.T) {
	c, err := oscatalog.Load(oscatalog.Shipped(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Profiles()) == 0 {
		t.Fatal("no shipped profiles")
	}
	for _, p := range c.Profiles() {
		if err := eim.Validate(p.OS()); err != nil {
			t.Errorf("profile %s %s: %v", p.ProfileName, p.ImageVersion, err)
		}
	}
}
