@echo off
echo two
echo three
exit /b 0
