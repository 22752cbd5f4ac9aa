package oscatalog

import "strings"

// CompareVersions orders image versions such as 3.0.20250717.0718 or
// 22.04.5: -1 when a is older than b, +1 when newer, 0 when they are the
// same version. Versions are compared piece by piece, where a piece is a
// run of digits (compared as a number: 0718 is 718, 10 is after 9), a run
// of letters or one other character (compared as text; a number ranks
// above text at the same place: 3.0.1 after 3.0.beta). When one version is the
// other with more pieces, the longer is newer (3.0.1 after 3.0), unless
// what it adds starts with '-' or '~', which mark a pre-release
// (1.0.0-rc1 before 1.0.0). Equal versions that are spelled differently
// (0718 and 718) compare as 0.
func CompareVersions(a, b string) int {
	for {
		switch {
		case a == "" && b == "":
			return 0
		case a == "":
			return -tail(b)
		case b == "":
			return tail(a)
		}
		pa, ra := piece(a)
		pb, rb := piece(b)
		if c := comparePieces(pa, pb); c != 0 {
			return c
		}
		a, b = ra, rb
	}
}

// tail is how a version's remaining pieces rank against nothing: a
// pre-release marker makes it older, anything else newer.
func tail(rest string) int {
	if rest[0] == '-' || rest[0] == '~' {
		return -1
	}
	return 1
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// piece splits off the leading run of digits, or run of letters, or one
// other character (a separator).
func piece(s string) (string, string) {
	i := 1
	switch {
	case isDigit(s[0]):
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	case isLetter(s[0]):
		for i < len(s) && isLetter(s[i]) {
			i++
		}
	}
	return s[:i], s[i:]
}

func comparePieces(a, b string) int {
	da, db := isDigit(a[0]), isDigit(b[0])
	switch {
	case da && db:
		// As numbers of any length: without leading zeros, the longer is
		// larger; equal lengths compare as text.
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			if len(a) < len(b) {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	case da:
		// A number where the other has text (3.0.1 vs 3.0.beta): the
		// number is the release, the text something before it.
		return 1
	case db:
		return -1
	}
	// Text against text: a pre-release marker ranks below any other
	// separator at the same place (1.0-rc1 before 1.0.1).
	pa, pb := a[0] == '-' || a[0] == '~', b[0] == '-' || b[0] == '~'
	if pa != pb {
		if pa {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
