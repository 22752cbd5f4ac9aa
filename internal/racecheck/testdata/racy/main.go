// Command racy has a data race on purpose: racecheck's test builds and runs
// it to see that a child built by Build reports races exactly when the test
// binary itself runs under the race detector.
package main

import "fmt"

var n int

func main() {
	done := make(chan struct{})
	go func() {
		n++ // races with the increment below: nothing orders the two
		close(done)
	}()
	n++
	<-done
	fmt.Println(n)
}
