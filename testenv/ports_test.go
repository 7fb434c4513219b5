package testenv

import "testing"

// TestFreePortsDistinct: the ports of one call are never the same port,
// which two freePort calls in a row can be (the kernel hands a closed
// port out again), and which made etcd's client and peer URLs clash.
func TestFreePortsDistinct(t *testing.T) {
	for range 500 {
		ports, err := freePorts(4)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ports {
			if seen[p] || p == 0 {
				t.Fatalf("freePorts(4) = %v: a port twice", ports)
			}
			seen[p] = true
		}
	}
}
