package main

import (
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite"
)

// explain prints SQLite's plan of each statement (one "?" bound to "p").
func explain(path string, qs ...string) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	for _, q := range qs {
		rows, err := db.Query("EXPLAIN QUERY PLAN "+q, "p")
		if err != nil {
			fmt.Println(q, err)
			continue
		}
		fmt.Println(q)
		for rows.Next() {
			var a, b, c int
			var d string
			rows.Scan(&a, &b, &c, &d)
			fmt.Println("   ", d)
		}
		rows.Close()
	}
}
