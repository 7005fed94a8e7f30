@echo off
echo one
exit /b 0
