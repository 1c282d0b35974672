package main

// The time zone database is built in, so a policy's or plan's timezone: (calendar windows)
// resolves the same on every host, a distroless image without /usr/share/zoneinfo too;
// Go prefers the system's copy when there is one. About 450 KB of binary.
import _ "time/tzdata"
