// Package config is the configuration `gangway server`, `gangway agent`
// and `gangway dev` read at start: one Config struct with its defaults
// (Default), the layering of defaults, config file, environment and flags
// (Load, BindGlobalFlags), and one Validate that names every bad field by
// its YAML path. deploy/gangway.example.yaml documents every field, and a
// test keeps the two in step.
//
// The package also turns config sections into the option structs of the
// packages they configure (PlacementConfig.Options, ProviderConfig.AWSOptions,
// Config.Join, CloudConfig.TeamLimits), so a command composes them without
// copying fields. It opens nothing and dials nothing: cmd/gangway does that.
package config
