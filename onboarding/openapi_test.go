package onboarding_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/onboarding"
)

// TestOpenAPIRoutes: the document's enrollment lobby operations are
// exactly the module's routes.
func TestOpenAPIRoutes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(api.Spec())
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		if strings.Contains(path, "/enrollmentrequests") || strings.Contains(path, "/enrollmentrules") {
			for method := range item.Operations() {
				documented = append(documented, method+" "+path)
			}
		}
	}
	var routed []string
	for pattern := range (&onboarding.Service{}).Routes(nil) {
		routed = append(routed, pattern)
	}
	slices.Sort(documented)
	slices.Sort(routed)
	if !slices.Equal(documented, routed) {
		t.Fatalf("documented %v\nrouted %v", documented, routed)
	}
}
