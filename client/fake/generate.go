package fake

//go:generate go run ./internal/gen
