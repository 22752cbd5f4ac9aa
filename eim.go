// Package eim holds the domain of the Edge Infrastructure Manager: the resources
// (hosts, instances, sites, regions, OS profiles …), their validation, error
// codes, and the small interfaces the rest of the system depends on.
//
// It imports only the standard library. Adapters (sqlstore, httpapi, …) import
// it and not each other; cmd/eim wires them together.
package eim
