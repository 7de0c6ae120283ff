module tensorasync

go 1.19
