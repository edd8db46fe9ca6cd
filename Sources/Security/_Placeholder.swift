// The Security module: see SecItem.swift
