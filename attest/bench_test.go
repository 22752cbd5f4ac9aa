package attest_test

import (
	"testing"

	"github.com/eimhq/eim/attest"
)

func BenchmarkVerifyCaptured(b *testing.B) {
	rep, served := captured(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := attest.Verify(rep, served); err != nil {
			b.Fatal(err)
		}
	}
}
