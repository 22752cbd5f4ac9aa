module github.com/eimhq/eim

go 1.26.8
