package eim

import (
	"encoding/json"
	"reflect"
)

// JSONUnion is a type whose JSON is one of several JSON types (IntOrPercent:
// a number or a string). JSONTypes names them for a type error; a type's
// Go kind would name only the one it is stored as.
type JSONUnion interface {
	JSONTypes() string
}

// JSONTypeProblem says what a JSON type error is about for a user: the
// field and what it takes ("rolloutPolicy.batches.limit: want a number or
// a percentage string"), without Go's type names.
func JSONTypeProblem(te *json.UnmarshalTypeError) string {
	return te.Field + ": want " + wantedJSON(te.Type)
}

func wantedJSON(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	if u, ok := reflect.New(t).Interface().(JSONUnion); ok {
		return u.JSONTypes()
	}
	return "a " + t.Kind().String()
}
