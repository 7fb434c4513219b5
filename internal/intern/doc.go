// Package intern keeps one copy of identical decoded values that many
// cached objects hold: a table from the hash of a value's encoded bytes to
// a weak pointer to the value decoded once. A decoder that meets bytes it
// has seen before takes the value from the table instead of decoding them
// again, so objects of one shape (the Pods of one workload, say) share
// their containers, volumes, labels and managed-fields blobs.
//
// The table never keeps a value alive: an entry holds a weak pointer, and
// a cleanup removes it once the last object using the value is collected.
// Keys are 128-bit hashes with per-process random seeds, tagged with the Go
// type of the value, so that a false match is not a practical concern.
//
// [Options] say how a decoder uses a table: what it shares, and when it
// stops looking up a field whose values prove unique.
//
// Values handed out by the table are shared by every object that uses
// them: nobody may change them in place. To catch code that does, the
// table also knows each value by its address, with a fingerprint ([Sum])
// taken when it was put; [Table.Changed] looks through an object for
// values whose fingerprint no longer matches, and writes refuse to send
// them. [Process] is the table Loom's informers share.
package intern
